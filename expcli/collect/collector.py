"""Collector: a ParallelEnv (or Gymnasium vector env) and a policy, stepped into a Memory.

Every step's transitions go straight into the memory's preallocated rows (through
``RowWriter``), episode statistics are kept from exactly the rows stored, and a plain
callback reports progress; nothing here knows about terminals or files.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.collect.episode_stats import EpisodeSummary, EpisodeTracker
from expcli.collect.info_columns import InfoColumns
from expcli.collect.reward_dtypes import RewardsNote
from expcli.collect.row_writer import RowWriter
from expcli.collect.spaces import layout_of, space_record
from expcli.collect.step_outcome import StepOutcome
from expcli.collect.step_values import step_values
from expcli.collect.steppers import make_stepper
from expcli.errors import ConfigError
from expcli.spec import INFO_PREFIX

if TYPE_CHECKING:
    from expcli.memory import Memory

__all__ = [
    "CollectStats",
    "Collector",
    "CollectorBase",
    "Progress",
    "create_tensors",
    "space_metadata",
]


@dataclass(frozen=True, slots=True)
class Progress:
    """What the progress callback receives."""

    steps: int
    target_steps: int | None
    episodes: int
    target_episodes: int | None
    recent_mean_return: float
    elapsed: float


@dataclass(frozen=True, slots=True)
class CollectStats:
    """The outcome of ``Collector.collect``.

    Attributes:
        steps: Transitions stored by this call.
        env_steps: Env steps taken (more than ``steps`` when resets took steps, or some
            transitions were still waiting for other columns when the run stopped).
        episodes: Episode counts and spreads (over everything collected so far).
        elapsed: Wall time in seconds.
        interrupted: Whether ``stop()`` ended the run early.
        dropped: Transitions not stored because the run stopped before their row was
            complete (columns out of step).
    """

    steps: int
    env_steps: int
    episodes: EpisodeSummary
    elapsed: float
    interrupted: bool
    dropped: int

    @property
    def steps_per_second(self) -> float:
        """Stored transitions per second of wall time."""
        return self.steps / self.elapsed if self.elapsed > 0 else math.nan


Policy = Callable[[Any], Any]


class CollectorBase:
    """What every collector answers: its spaces' metadata, rows stored, and ``stop()``."""

    stepper: Any
    rewards_note: RewardsNote
    _writer: RowWriter | None
    _stop: bool

    def space_metadata(self) -> dict[str, Any]:
        """The spaces' descriptions and the rewards' dtypes, for the dataset's metadata."""
        stepper = self.stepper
        return space_metadata(stepper.observation_space, stepper.action_space, self.rewards_note)

    @property
    def steps_stored(self) -> int:
        """Transitions the last (or running) ``collect`` call stored, even if it raised."""
        writer = self._writer
        return 0 if writer is None else writer.committed_rows * self.stepper.num_envs

    def stop(self) -> None:
        """Ask a running ``collect`` to return after the current step (safe from a signal)."""
        self._stop = True


class Collector(CollectorBase):
    """Steps ``env`` with ``policy`` and stores every transition in ``memory``.

    Args:
        env: A ``ParallelEnv`` or a Gymnasium ``VectorEnv``.
        memory: A ``Memory`` with ``num_envs`` columns; the standard tensors are created
            from the env's spaces when missing.
        policy: ``policy(observations) -> actions`` on batches; None samples the action
            space (seeded with ``seed``).
        seed: Seed of the first reset (env ``i`` gets ``seed + i``) and of random actions.
        infos: Also store numeric scalar infos as ``infos/<key>`` (float64, NaN where an
            env did not report a number), from the step a key first holds a number;
            ``info_columns.notes()`` names the keys skipped.
        grow: Double the memory when full instead of wrapping (for runs of unknown length).
        check_actions: ``check(actions)`` run on the first batch of actions; raises when
            the policy's output does not fit the action space.
        rewards_dtype: dtype of the stored rewards: float32 (the default, as skrl) or
            float64. Narrowing is recorded in the memory's metadata (``rewards``).

    Dict and Tuple spaces are stored one tensor per leaf (``observations/pos``...), and a
    policy receives their batches as a dict (or tuple) of ``(num_envs, *leaf_shape)``
    arrays. The spaces' descriptions go into ``memory.metadata``.

    Raises:
        ConfigError: The memory and the env disagree, a space has a leaf expcli cannot
            store, or ``rewards_dtype`` is not float32 or float64.
    """

    def __init__(
        self,
        env: object,
        memory: Memory,
        policy: Policy | None = None,
        *,
        seed: int | None = None,
        infos: bool = False,
        grow: bool = False,
        check_actions: Callable[[Any], Any] | None = None,
        rewards_dtype: Any = np.float32,
    ) -> None:
        self.stepper = make_stepper(env)
        self.env = env
        self.memory = memory
        self.seed = seed
        if memory.num_envs != self.stepper.num_envs:
            raise ConfigError(
                f"the memory has {memory.num_envs} env columns but the env runs "
                f"{self.stepper.num_envs} envs"
            )
        if policy is None:
            from expcli.collect.policies import RandomPolicy

            policy = RandomPolicy(self.stepper.action_space, self.stepper.num_envs, seed)
        self.policy = policy
        self._check_actions = check_actions
        self._rewards_dtype = np.dtype(rewards_dtype)
        if self._rewards_dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ConfigError(f"rewards_dtype must be float32 or float64, got {rewards_dtype!r}")
        self._obs_layout = layout_of(self.stepper.observation_space, "observations")
        self._act_layout = layout_of(self.stepper.action_space, "actions")
        self.rewards_note = RewardsNote(self._rewards_dtype.name)
        create_tensors(
            memory, self.stepper.observation_space, self.stepper.action_space, self.rewards_note
        )
        self.info_columns = InfoColumns() if infos else None
        self._writer: RowWriter | None = None
        self.tracker = EpisodeTracker(self.stepper.num_envs)
        self._grow = grow
        self._obs: Any = None
        self._obs_rows: dict[str, np.ndarray] = {}
        self._stop = False
        self.env_steps = 0

    def collect(
        self,
        steps: int | None = None,
        episodes: int | None = None,
        progress: Callable[[Progress], None] | None = None,
        progress_interval: float = 0.1,
    ) -> CollectStats:
        """Collect until ``steps`` transitions are stored or ``episodes`` have completed.

        Exactly one of ``steps`` and ``episodes`` is needed. ``steps`` is rounded up to
        whole rows (a multiple of ``num_envs``). The envs are reset on the first call; a
        second call goes on from where the first stopped.

        Raises:
            ConfigError: Neither or both targets, or actions that do not fit the space.
            EnvError: An env failed; what was stored so far stays in the memory.
        """
        if (steps is None) == (episodes is None):
            raise ConfigError("collect needs exactly one of steps or episodes")
        target = steps if steps is not None else episodes
        if isinstance(target, bool) or not isinstance(target, int) or target < 1:
            raise ConfigError(f"the number of steps or episodes must be positive, got {target!r}")
        n = self.stepper.num_envs
        limit = -(-steps // n) if steps is not None else None
        episodes_before = self.tracker.complete
        writer = RowWriter(self.memory, self._on_commit, grow=self._grow, limit_rows=limit)
        self._writer = writer
        self._stop = False
        start = time.perf_counter()
        next_report = start
        env_steps_before = self.env_steps
        obs_layout = self._obs_layout
        if self._obs is None:
            self._obs = self.stepper.reset(self.seed)
            self._obs_rows = obs_layout.rows(self._obs, n)
        check = self._check_actions
        from expcli.envs.watchdog import StepInterrupted

        try:
            while not self._stop:
                if limit is not None:
                    if writer.full:
                        break
                elif self.tracker.complete - episodes_before >= target:
                    break
                seen = obs_layout.batched(self._obs_rows) if obs_layout.composite else self._obs
                actions = self.policy(seen)
                if check is not None:
                    actions = check(actions)
                    check = None
                outcome = self.stepper.step(actions)
                self.env_steps += n
                final_rows = obs_layout.rows(outcome.final_obs, n)
                values = self._values(outcome, final_rows, actions)
                if writer.write(values, outcome.valid):
                    self.tracker.add_row(
                        values["rewards"], values["terminated"], values["truncated"]
                    )
                self._obs = outcome.next_obs
                if outcome.next_obs is outcome.final_obs:
                    self._obs_rows = final_rows
                else:
                    self._obs_rows = obs_layout.rows(outcome.next_obs, n)
                if progress is not None and (now := time.perf_counter()) >= next_report:
                    next_report = now + progress_interval
                    progress(self._progress(writer, steps, episodes, episodes_before, now - start))
        except StepInterrupted:
            self._stop = True  # stop() was called while an env hung; the envs are closed
        finally:
            writer.flush()
            self.memory.metadata["rewards"] = self.rewards_note.to_json()
        elapsed = time.perf_counter() - start
        if progress is not None:
            progress(self._progress(writer, steps, episodes, episodes_before, elapsed))
        return CollectStats(
            steps=writer.committed_rows * n,
            env_steps=self.env_steps - env_steps_before,
            episodes=self.tracker.summary(),
            elapsed=elapsed,
            interrupted=self._stop,
            dropped=writer.staged,
        )

    def _values(
        self, outcome: StepOutcome, final_rows: dict[str, np.ndarray], actions: Any
    ) -> dict[str, np.ndarray]:
        n = self.stepper.num_envs
        values = step_values(
            self._obs_rows, final_rows, self._act_layout, actions, outcome, self.rewards_note, n
        )
        columns = self.info_columns
        if columns is not None:
            self._add_info_tensors(columns.new_keys(outcome.infos))
            values.update(columns.columns(outcome.infos))
        return values

    def _add_info_tensors(self, keys: Sequence[str]) -> None:
        """Create the ``infos/<key>`` tensor of each key met with a number for the first time."""
        if not keys:
            return
        for key in keys:
            self.memory.create_tensor(INFO_PREFIX + key, 1, np.float64)
            if self._writer is not None:
                self._writer.add_tensor(INFO_PREFIX + key, np.zeros(1, np.float64))

    def _on_commit(self, rows: Mapping[str, np.ndarray]) -> None:
        self.tracker.update(rows["rewards"], rows["terminated"], rows["truncated"])

    def _progress(
        self,
        writer: RowWriter,
        steps: int | None,
        episodes: int | None,
        episodes_before: int,
        elapsed: float,
    ) -> Progress:
        return Progress(
            steps=writer.committed_rows * self.stepper.num_envs,
            target_steps=steps,
            episodes=self.tracker.complete - episodes_before,
            target_episodes=episodes,
            recent_mean_return=self.tracker.recent_mean_return(),
            elapsed=elapsed,
        )

    def close(self) -> None:
        """Close the envs."""
        self.stepper.close()


def create_tensors(
    memory: Memory, observation_space: Any, action_space: Any, note: RewardsNote
) -> None:
    """Create the standard tensors of these spaces in ``memory`` (one per leaf).

    The memory's metadata gets the spaces' descriptions too. The dtypes are numpy's, so that
    a memory of numpy arrays (``Memory(device="cpu")``) stays torch-free.
    """
    for prefixes, layout in (
        (("observations", "next_observations"), layout_of(observation_space, "observations")),
        (("actions",), layout_of(action_space, "actions")),
    ):
        for leaf in layout.leaves:
            for prefix in prefixes:
                memory.create_tensor(prefix + leaf.suffix, leaf.shape, leaf.dtype, True)
    memory.create_tensor("rewards", 1, np.dtype(note.dtype))
    memory.create_tensor("terminated", 1, np.bool_)
    memory.create_tensor("truncated", 1, np.bool_)
    memory.metadata.update(space_metadata(observation_space, action_space, note))


def space_metadata(observation_space: Any, action_space: Any, note: RewardsNote) -> dict[str, Any]:
    """The spaces' descriptions and the rewards' dtypes, for the dataset's metadata."""
    return {
        "observation_space": space_record(observation_space),
        "action_space": space_record(action_space),
        "rewards": note.to_json(),
    }
