"""Collect from rollout actors: chunks in, merged in order, rows into the memory.

The driver keeps up to ``IN_FLIGHT`` chunk requests per actor, so that a straggler can
fall that many chunks (about 0.2 s of env work) behind before the others wait for it; at
most ``IN_FLIGHT`` times ``_MAX_CHUNK_BYTES`` are held. Chunk ``s`` of every actor
covers the same steps, so once all actors have answered it, its columns are joined in
global env order (row ``t`` = every env at step ``t``) and written; arrival order never
matters, so a seeded run gives the bytes of ``--mode dummy``. A merged chunk is held back
until the next one is complete: when an actor is lost, its last rows are still in hand,
and its episodes in flight are marked truncated there before they are written.

The chunk length comes from the measured cost of a step (``TARGET_SECONDS`` of env work
per call, so that Ray's per-call cost, about a millisecond, stays small), or from
``chunk_steps``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.collect.collector import CollectorBase, CollectStats, Progress, create_tensors
from expcli.collect.episode_stats import EpisodeTracker
from expcli.collect.reward_dtypes import RewardsNote
from expcli.collect.rollout.fleet import ActorLost, Request, RolloutFleet
from expcli.collect.row_writer import RowWriter
from expcli.errors import ConfigError

if TYPE_CHECKING:
    from expcli.memory import Memory

__all__ = ["RolloutCollector"]

IN_FLIGHT = 4
TARGET_SECONDS = 0.05
FIRST_STEPS = 8  # the first chunk: measures a step's cost
_MAX_CHUNK_BYTES = 32 << 20  # per chunk of all actors together
_SLICE = 0.1


class RolloutCollector(CollectorBase):
    """Like ``Collector``, over a ``RolloutFleet`` (its ``stepper`` is the fleet).

    Args:
        fleet: The actors.
        memory: A ``Memory`` with ``fleet.num_envs`` columns.
        seed: The run's seed (replacement actors' seeds derive from it).
        grow: Grow the memory instead of wrapping.
        rewards_dtype: Stored rewards' dtype.
        chunk_steps: Steps per chunk (None: from the measured cost).
        chunk_timeout: Seconds an actor may take over a chunk (None: no limit).
        restart_on_error: Replace a lost actor instead of failing.
    """

    def __init__(
        self,
        fleet: RolloutFleet,
        memory: Memory,
        *,
        seed: int,
        grow: bool = False,
        rewards_dtype: Any = np.float32,
        chunk_steps: int | None = None,
        chunk_timeout: float | None = None,
        restart_on_error: bool = False,
    ) -> None:
        self.stepper = self.env = fleet
        self.memory = memory
        self.seed = seed
        self.rewards_note = RewardsNote(np.dtype(rewards_dtype).name)
        create_tensors(memory, fleet.observation_space, fleet.action_space, self.rewards_note)
        self.tracker = EpisodeTracker(fleet.num_envs)
        self._grow = grow
        self.chunk_steps = chunk_steps
        self.chunk_timeout = chunk_timeout
        self.restart_on_error = restart_on_error
        self._writer: RowWriter | None = None
        self._stop = False
        self.env_steps = 0
        self._step_seconds = math.nan
        self.last_chunk_steps: int | None = None  # the length chosen last (from the cost)

    def collect(
        self,
        steps: int | None = None,
        episodes: int | None = None,
        progress: Callable[[Progress], None] | None = None,
        progress_interval: float = 0.1,
    ) -> CollectStats:
        """Collect until ``steps`` transitions are stored or ``episodes`` have completed.

        Raises:
            ConfigError: Neither or both targets, or a policy that failed in an actor.
            EnvError: An env failed, or an actor was lost without ``restart_on_error``;
                what was merged so far is in the memory.
        """
        if (steps is None) == (episodes is None):
            raise ConfigError("collect needs exactly one of steps or episodes")
        n = self.stepper.num_envs
        limit = -(-steps // n) if steps is not None else None
        self._writer = writer = RowWriter(
            self.memory, self._on_commit, grow=self._grow, limit_rows=limit
        )
        run = _Run(self, writer, limit, episodes, progress, progress_interval)
        self._stop = False
        try:
            run.loop()
        finally:
            run.finish()
            self.memory.metadata["rewards"] = self.rewards_note.to_json()
        return CollectStats(
            steps=writer.committed_rows * n,
            env_steps=self.env_steps - run.env_steps_before,
            episodes=self.tracker.summary(),
            elapsed=time.perf_counter() - run.start,
            interrupted=self._stop,
            dropped=0,
        )

    def _on_commit(self, rows: Any) -> None:
        self.tracker.update(rows["rewards"], rows["terminated"], rows["truncated"])

    def metadata(self) -> dict[str, Any]:
        """The rollout's record for the metadata (actors, nodes, restarts, chunk steps)."""
        steps = self.chunk_steps or self.last_chunk_steps
        return {"rollout": {**self.stepper.metadata(), "chunk_steps": steps}}

    def close(self) -> None:
        """Kill the actors."""
        self.stepper.close()


class _Run:
    """One ``collect`` call's state: requests in flight, chunks by sequence, the held row block."""

    def __init__(
        self,
        owner: RolloutCollector,
        writer: RowWriter,
        limit: int | None,
        episodes: int | None,
        progress: Callable[[Progress], None] | None,
        interval: float,
    ) -> None:
        self.o, self.writer, self.limit = owner, writer, limit
        self.episodes, self.progress, self.interval = episodes, progress, interval
        self.fleet = owner.stepper
        self.actors = len(self.fleet.specs)
        self.requests: list[Request] = []
        self.arrived: dict[int, dict[int, dict[str, Any]]] = {}  # seq -> actor -> chunk
        self.lengths: dict[int, int] = {}  # seq -> steps
        self.next_seq = self.next_merge = 0
        self.requested_rows = 0
        self.held: dict[str, np.ndarray] | None = None
        self.episodes_before = owner.tracker.complete
        self.env_steps_before = owner.env_steps
        self.start = time.perf_counter()
        self.next_report = self.start
        self.done = False
        self.last_answer: dict[int, float] = {}  # actor -> when it last answered

    # -------------------------------------------------------------- requests

    def _chunk_length(self) -> int:
        o = self.o
        if o.chunk_steps is not None:
            k = o.chunk_steps
        elif math.isnan(o._step_seconds):
            k = FIRST_STEPS
        else:
            k = max(1, math.ceil(TARGET_SECONDS / max(o._step_seconds, 1e-7)))
            row_bytes = max(1, self._row_bytes())
            k = min(k, max(1, _MAX_CHUNK_BYTES // row_bytes), 1 << 16)
        if self.limit is not None:
            k = min(k, self.limit - self.requested_rows)
        return k

    def _row_bytes(self) -> int:
        memory = self.o.memory
        return sum(  # the numpy views: asking for torch tensors would import torch here
            int(array[0].nbytes) for array in memory.to_dataset().tensors.values()
        )

    def _top_up(self) -> None:
        """Ask every actor for the next chunks, up to ``IN_FLIGHT`` sequences ahead."""
        while not self.done and not self.o._stop and self.next_seq - self.next_merge < IN_FLIGHT:
            if math.isnan(self.o._step_seconds) and self.next_seq > 0:
                return  # the first chunk's cost first
            k = self._chunk_length()
            if k <= 0:
                return
            seq = self.next_seq
            self.lengths[seq] = self.o.last_chunk_steps = k
            self.requests += [self.fleet.request(a, seq, k) for a in range(self.actors)]
            self.requested_rows += k
            self.next_seq += 1

    # ------------------------------------------------------------------ loop

    def loop(self) -> None:
        o = self.o
        self._top_up()
        while self.requests and not o._stop and not self.done:
            ready = self.fleet.wait(self.requests, _SLICE)
            for request in ready:
                if request not in self.requests:
                    continue  # its actor was lost and replaced meanwhile
                self.requests.remove(request)
                try:
                    chunk = self.fleet.result(request)
                except ActorLost as lost:
                    self._lost(lost)
                    continue
                self.last_answer[request.actor] = time.monotonic()
                o.env_steps += chunk["env_steps"]
                self._note_rewards(chunk)
                per_step = chunk["seconds"] / max(1, request.steps)
                # a running mean: one slow chunk (a busy machine) does not shrink the rest
                o._step_seconds = (
                    per_step
                    if math.isnan(o._step_seconds)
                    else 0.8 * o._step_seconds + 0.2 * per_step
                )
                self.arrived.setdefault(request.seq, {})[request.actor] = chunk["columns"]
            self._check_timeouts()
            self._merge_ready()
            self._report()
            self._top_up()

    def _note_rewards(self, chunk: dict[str, Any]) -> None:
        note = self.o.rewards_note
        note.changed += int(chunk["rewards_changed"])
        if note.env_dtype is None:
            note.env_dtype = chunk["rewards_env_dtype"]

    def _check_timeouts(self) -> None:
        timeout = self.o.chunk_timeout
        if timeout is None:
            return
        now = time.monotonic()
        oldest: dict[int, Request] = {}
        for r in self.requests:  # an actor works on its oldest request
            if r.actor not in oldest or r.seq < oldest[r.actor].seq:
                oldest[r.actor] = r
        for a, r in oldest.items():
            began = max(r.sent, self.last_answer.get(a, r.sent))
            if now - began >= timeout:
                self.fleet.kill(a)
                what = f"sent nothing within {timeout:g} s (--chunk-timeout); it was stopped"
                self._lost(ActorLost(a, self.fleet.error(a, what)))

    def _lost(self, lost: ActorLost) -> None:
        """An actor died or hung: fail, or replace it (its episodes in flight truncated)."""
        a = lost.actor
        if not self.o.restart_on_error:
            raise lost.error
        self._truncate_last_rows(a)
        self.requests = [r for r in self.requests if r.actor != a]
        delivered = [s for s, chunks in self.arrived.items() if a in chunks]
        first = max(delivered) + 1 if delivered else self.next_merge
        row = self.writer.committed_rows + sum(
            self.lengths[s] for s in range(self.next_merge, first)
        )
        row += 0 if self.held is None else _rows(self.held)
        self.fleet.replace(a, self.o.seed, row, lost.error)
        # the new actor's envs start afresh where the lost one's rows end
        for seq in range(first, self.next_seq):
            self.requests.append(self.fleet.request(a, seq, self.lengths[seq]))
        self.last_answer[a] = time.monotonic()

    def _truncate_last_rows(self, a: int) -> None:
        """Mark actor ``a``'s last delivered row truncated (where it did not end there)."""
        spec = self.fleet.specs[a]
        mine = [s for s, chunks in self.arrived.items() if a in chunks]
        if mine:
            columns = dict(self.arrived[max(mine)][a])
            truncated = columns["truncated"].copy()  # Ray's arrays are read-only
            truncated[-1] |= ~columns["terminated"][-1]
            columns["truncated"] = truncated
            self.arrived[max(mine)][a] = columns
        elif self.held is not None:
            cols = slice(spec.lo, spec.hi)
            truncated = self.held["truncated"].copy()
            truncated[-1, cols] |= ~self.held["terminated"][-1, cols]
            self.held["truncated"] = truncated

    def _merge_ready(self) -> None:
        while not self.done and len(self.arrived.get(self.next_merge, {})) == self.actors:
            chunks = self.arrived.pop(self.next_merge)
            self.lengths.pop(self.next_merge, None)
            self.next_merge += 1
            parts = [chunks[a] for a in range(self.actors)]
            if self.actors == 1:
                block = dict(parts[0])
            else:
                block = {k: np.concatenate([p[k] for p in parts], axis=1) for k in parts[0]}
            self._release_held()
            self.held = block
            self._trim_to_episodes()

    def _release_held(self) -> None:
        held, self.held = self.held, None
        if held is not None:
            self.writer.write_block(held)
            if self.writer.full:
                self.done = True

    def _trim_to_episodes(self) -> None:
        """With an episode target, keep the rows up to the one that reaches it."""
        if self.episodes is None or self.held is None:
            return
        o = self.o
        need = self.episodes - (o.tracker.complete - self.episodes_before)
        ends = (self.held["terminated"] | self.held["truncated"]).reshape(_rows(self.held), -1)
        reached = np.cumsum(ends.sum(axis=1)) >= need
        if reached.any():
            last = int(np.argmax(reached)) + 1
            self.held = {k: v[:last] for k, v in self.held.items()}
            self._release_held()
            self.done = True

    def _report(self) -> None:
        if self.progress is None:
            return
        now = time.perf_counter()
        if now >= self.next_report:
            self.next_report = now + self.interval
            self.progress(self._progress(now))

    def _progress(self, now: float) -> Progress:
        o = self.o
        return Progress(
            steps=self.writer.committed_rows * o.stepper.num_envs,
            target_steps=None if self.limit is None else self.limit * o.stepper.num_envs,
            episodes=o.tracker.complete - self.episodes_before,
            target_episodes=self.episodes,
            recent_mean_return=o.tracker.recent_mean_return(),
            elapsed=now - self.start,
        )

    def finish(self) -> None:
        """Write the held rows (they are complete), then report once more."""
        self._release_held()
        if self.progress is not None:
            self.progress(self._progress(time.perf_counter()))


def _rows(block: dict[str, np.ndarray]) -> int:
    return len(next(iter(block.values())))
