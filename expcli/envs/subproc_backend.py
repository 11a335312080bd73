"""The subproc backend: worker processes, each hosting a slice of the envs.

Actions, observations, rewards and done flags travel through shared memory (one
``RawArray`` per buffer, each worker viewing its own rows); the pipe carries one short
command per worker per step and the rare infos. Peers run one process per env, which
wastes cheap envs on small machines; here the default is one worker per usable CPU,
pinned to it. This module is the parent's side; ``subproc_worker`` is the workers'.

The parent waits for answers in slices of ``SLICE`` seconds; between two it looks at the
env each worker is calling (a shared int64 per worker): one that stays in the same call
for ``step_timeout`` seconds is hung, and its worker is killed.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from expcli.envs._batching import covers_all, gather, take
from expcli.envs.backend import StepBatch
from expcli.envs.env_group import EnvGroup, GroupError, Slots
from expcli.envs.subproc_worker import (
    STEP_ALL,
    Command,
    Factory,
    SharedBuffers,
    required,
    usable_cpus,
)
from expcli.envs.watchdog import INTERRUPT_GRACE, SLICE, Stall, StepInterrupted, hung_message
from expcli.envs.worker_handle import WorkerHandle
from expcli.errors import EnvError

__all__ = ["SubprocBackend"]


class SubprocBackend:
    """Envs spread over worker processes talking through shared memory.

    Args:
        factories: One zero-argument env factory per env (picklable; see ``factories.py``).
        num_workers: Worker processes; default one per core, at most one per env.
        restart_on_error: Rebuild failing envs (in the worker) or dead workers instead
            of raising.
        no_warning: Silence env warnings.
        label_offset: Added to env numbers in messages, when these envs are a slice of a
            larger set (ray-subproc); ids and ``EnvError.index`` stay local.
        pin: Pin worker ``i`` to the ``i``-th CPU this process may use (Linux). Waiting
            workers stay runnable (see ``Doorbell``), so the scheduler cannot tell busy
            from waiting and may stack two busy workers on one core; pinning keeps them
            apart. Off where several groups share a machine (ray-subproc).
        step_timeout: Seconds an env's call may take before its worker is stopped and
            the env reported hung (None: no limit).

    Raises:
        EnvError: An env could not be built, or a worker failed to start.
    """

    def __init__(
        self,
        factories: Sequence[Factory],
        num_workers: int | None = None,
        restart_on_error: bool = False,
        no_warning: bool = True,
        label_offset: int = 0,
        pin: bool = True,
        step_timeout: float | None = None,
    ) -> None:
        self.num_envs = len(factories)
        self.label_offset = label_offset
        self.factories = list(factories)
        self.restart_on_error, self.no_warning = restart_on_error, no_warning
        self.step_timeout = step_timeout
        self.restarts = 0
        self._autoreset = False
        self._workers: list[WorkerHandle] = []
        self._closed = False
        self._interrupted_at: float | None = None
        try:
            probe = EnvGroup(self.factories[:1], 0, None, False, no_warning)
        except GroupError as e:
            raise e.record.to_error() from None
        self.observation_space = probe.envs[0].observation_space
        self.action_space = probe.envs[0].action_space
        probe.close()
        cpus = usable_cpus()
        count = max(1, min(num_workers or len(cpus), self.num_envs))
        self._cpus: list[int | None] = (
            [cpus[i % len(cpus)] for i in range(count)] if pin else [None] * count
        )
        bounds = np.linspace(0, self.num_envs, count + 1).round().astype(int)
        self._ctx = mp.get_context("spawn")
        self._shared = SharedBuffers.allocate(
            self._ctx, self.num_envs, self.observation_space, self.action_space
        )
        self._progress = self._ctx.RawArray("q", count)  # the env each worker is calling
        self._busy = np.frombuffer(self._progress, dtype=np.int64)
        self._obs = self._shared.view("obs")
        self._actions = self._shared.view("actions")
        self._rewards, self._terminated, self._truncated = (
            required(self._shared.view(name)) for name in ("rewards", "terminated", "truncated")
        )
        self._slices = list(zip(bounds[:-1], bounds[1:], strict=True))
        self._owner = np.repeat(np.arange(count), np.diff(bounds))
        self._obs_list: list[Any] = [None] * self.num_envs
        self._slots = Slots(
            self._obs if self._obs is not None else self._obs_list,
            self._rewards,
            self._terminated,
            self._truncated,
        )
        self._all = {
            w: (list(range(stop - start)), list(range(start, stop)))
            for w, (start, stop) in enumerate(self._slices)
        }
        try:
            for index in range(count):
                self._workers.append(self._start(index))
            self._command(Command.START, dict.fromkeys(range(count)))
        except BaseException:
            self.close()
            raise

    def _start(self, index: int) -> WorkerHandle:
        start, stop = self._slices[index]
        return WorkerHandle(
            self._ctx,
            index,
            int(start),
            self.factories[start:stop],
            self._shared,
            self._progress,
            self.restart_on_error,
            self.no_warning,
            self._cpus[index],
            self.label_offset,
        )

    # ------------------------------------------------------------ commands

    def step(
        self, ids: np.ndarray, actions: Sequence[Any] | np.ndarray, autoreset: bool
    ) -> StepBatch:
        """Step the envs ``ids``; see ``Backend.step``."""
        per_worker = self._split(ids)
        if self._actions is not None:
            shaped = np.asarray(actions).reshape(len(ids), *self._actions.shape[1:])
            if per_worker is self._all:
                self._actions[:] = shaped
            else:
                self._actions[ids] = shaped
            payloads: dict[int, Any] = {
                w: (local, autoreset, None) for w, (local, _) in per_worker.items()
            }
            if per_worker is self._all:
                self._autoreset = autoreset
                payloads = dict.fromkeys(payloads, STEP_ALL)
        else:
            payloads = {
                w: (local, autoreset, [actions[p] for p in positions])
                for w, (local, positions) in per_worker.items()
            }
        replies, dead = self._broadcast(Command.STEP, payloads)
        infos: dict[int, dict[str, Any]] = {}
        restarted: list[int] = []
        for w, reply in replies.items():
            if reply is None:
                continue
            local_infos, local_restarted, obs = reply
            start = self._workers[w].start
            infos.update({start + i: info for i, info in local_infos.items()})
            restarted.extend(start + i for i in local_restarted)
            self.restarts += len(local_restarted)
            if obs is not None:
                for i, value in obs.items():
                    self._obs_list[start + i] = value
        for w, error in dead.items():
            restarted.extend(self._replace(w, error, per_worker[w][0], infos))
        return gather(self._slots, ids, infos, restarted)

    def reset(
        self, ids: np.ndarray, seeds: Sequence[int | None], options: dict[str, Any] | None
    ) -> tuple[np.ndarray | list[Any], list[dict[str, Any]]]:
        """Reset the envs ``ids``; see ``Backend.reset``."""
        per_worker = self._split(ids)
        payloads = {
            w: (local, [seeds[p] for p in pos], options) for w, (local, pos) in per_worker.items()
        }
        replies = self._command(Command.RESET, payloads)
        infos: list[dict[str, Any]] = [{} for _ in ids]
        for w, (local_infos, obs) in replies.items():
            for p, info in zip(per_worker[w][1], local_infos, strict=True):
                infos[p] = info
            if obs is not None:
                start = self._workers[w].start
                for i, value in obs.items():
                    self._obs_list[start + i] = value
        obs_all = self._obs if self._obs is not None else self._obs_list
        return take(obs_all, ids), infos

    def get_attr(self, ids: np.ndarray, key: str) -> list[Any]:
        """See ``Backend.get_attr``."""
        return self._ordered(ids, Command.GET_ATTR, lambda local, pos: (local, key))

    def set_attr(self, ids: np.ndarray, key: str, values: Sequence[Any]) -> None:
        """See ``Backend.set_attr``."""
        per_worker = self._split(ids)
        self._command(
            Command.SET_ATTR,
            {w: (local, key, [values[p] for p in pos]) for w, (local, pos) in per_worker.items()},
        )

    def call(self, ids: np.ndarray, method: str, kwargs: Sequence[dict[str, Any]]) -> list[Any]:
        """See ``Backend.call``."""
        return self._ordered(
            ids, Command.CALL, lambda local, pos: (local, method, [kwargs[p] for p in pos])
        )

    def interrupt(self) -> None:
        """Give up on a command not answered within ``INTERRUPT_GRACE`` s from now on."""
        if self._interrupted_at is None:
            self._interrupted_at = time.monotonic()

    def close(self) -> None:
        """Stop every worker (politely, then by force) and release the pipes; idempotent."""
        if self._closed:
            return
        self._closed = True
        for worker in self._workers:
            worker.shutdown()
        self._workers = []

    # ------------------------------------------------------------- plumbing

    def _split(self, ids: np.ndarray) -> dict[int, tuple[list[int], list[int]]]:
        """For each worker involved: local ids, and their positions in ``ids``."""
        if covers_all(ids, self.num_envs):
            return self._all
        per_worker: dict[int, tuple[list[int], list[int]]] = {}
        for p, i in enumerate(ids.tolist()):
            w = int(self._owner[i])
            local, positions = per_worker.setdefault(w, ([], []))
            local.append(i - int(self._slices[w][0]))
            positions.append(p)
        return per_worker

    def _broadcast(
        self, command: Command, payloads: dict[int, Any]
    ) -> tuple[dict[int, Any], dict[int, EnvError]]:
        """Send then collect; errors of envs raise, dead or hung workers are returned."""
        dead: dict[int, EnvError] = {}
        for w, payload in payloads.items():
            try:
                if payload is STEP_ALL:
                    self._workers[w].send_step_all(self._autoreset)
                elif command != Command.START:
                    self._workers[w].send(command, payload)
            except EnvError as e:
                dead[w] = e
        replies, failure = self._replies(command, [w for w in payloads if w not in dead], dead)
        if failure is not None:
            raise failure
        if dead and (command != Command.STEP or not self.restart_on_error):
            raise next(iter(dead.values()))
        return replies, dead

    def _replies(
        self, command: Command, workers: list[int], dead: dict[int, EnvError]
    ) -> tuple[dict[int, Any], EnvError | None]:
        """Each worker's answer; a worker that dies or hangs goes into ``dead``.

        Returns:
            The answers, and the first error of an env (its worker lives on).

        Raises:
            StepInterrupted: ``interrupt()`` was called and the answers are late.
        """
        replies: dict[int, Any] = {}
        failure: EnvError | None = None
        pending = dict.fromkeys(workers)
        started = time.monotonic()
        timed = self.step_timeout is not None and command != Command.START
        stalls = {w: Stall(self.step_timeout or 0.0) for w in workers} if timed else {}
        for w in workers:
            worker = self._workers[w]
            while w in pending and not worker.readable(SLICE):
                self._watch(command, pending, stalls, started, dead)
            if w not in pending:
                continue  # stopped as hung
            del pending[w]
            try:
                replies[w] = worker.receive(command)
            except EnvError as e:
                if worker.process.is_alive():
                    failure = failure or e  # an env raised: keep collecting, then raise
                else:
                    dead[w] = e
        return replies, failure

    def _watch(
        self,
        command: Command,
        pending: dict[int, None],
        stalls: dict[int, Stall],
        started: float,
        dead: dict[int, EnvError],
    ) -> None:
        """Between slices of a wait: give up after ``interrupt()``; stop hung workers."""
        now = time.monotonic()
        interrupted_at = self._interrupted_at
        if interrupted_at is not None and now - max(interrupted_at, started) >= INTERRUPT_GRACE:
            raise StepInterrupted(f"{command.name.lower()}() interrupted")
        for w, stall in stalls.items():
            index = int(self._busy[w])  # -1: between envs' calls (its answer may be there)
            if w in pending and index >= 0 and stall.stuck(index, now):
                worker = self._workers[w]
                worker.kill()
                del pending[w]
                dead[w] = EnvError(
                    f"{hung_message(command.name.lower(), stall.limit)}; its worker process "
                    f"{w} (envs {worker.envs}) was stopped",
                    index=index,
                )

    def _command(self, command: Command, payloads: dict[int, Any]) -> dict[int, Any]:
        replies, _ = self._broadcast(command, payloads)
        return replies

    def _ordered(
        self, ids: np.ndarray, command: Command, payload: Callable[[list[int], list[int]], Any]
    ) -> list[Any]:
        per_worker = self._split(ids)
        replies = self._command(
            command, {w: payload(local, pos) for w, (local, pos) in per_worker.items()}
        )
        results: list[Any] = [None] * len(ids)
        for w, values in replies.items():
            for p, value in zip(per_worker[w][1], values, strict=True):
                results[p] = value
        return results

    def _replace(
        self, w: int, error: EnvError, stepped: list[int], infos: dict[int, dict[str, Any]]
    ) -> list[int]:
        """Start a new worker for a dead one's envs; their episodes end truncated."""
        old = self._workers[w]
        old.shutdown()
        self._workers[w] = new = self._start(w)
        self._command(Command.START, {w: None})
        local = list(range(new.stop - new.start))
        reset_infos, obs = self._command(Command.RESET, {w: (local, [None] * len(local), None)})[w]
        if obs is not None:
            for i, value in obs.items():
                self._obs_list[new.start + i] = value
        self.restarts += len(local)
        for i in stepped:
            g = new.start + i
            self._rewards[g], self._terminated[g], self._truncated[g] = 0.0, False, True
            infos[g] = {**reset_infos[i], "env_error": str(error), "reset": True}
        return [new.start + i for i in stepped]
