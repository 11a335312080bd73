"""One collect run from settings to file: envs, policy, memory, collection, atomic save.

This is the library side of ``expcli collect``: the command only parses options, draws
the progress bar and the summary, and turns signals into ``stop()``.
"""

from __future__ import annotations

import datetime
import platform
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from expcli._version import __version__
from expcli.collect.collector import Collector, CollectStats, Progress
from expcli.collect.env_modes import (
    Probe,
    build_checked_vector,
    build_env,
    choose_mode,
    require_vector_entry_point,
)
from expcli.collect.memory_check import check_run_fits
from expcli.collect.settings import CollectSettings
from expcli.errors import OrderError, OutputError, OutputExistsError
from expcli.formats.dataset import Dataset
from expcli.formats.output_lock import OutputLock
from expcli.spec import CircularState

__all__ = ["CollectJob", "SavedFile", "default_output"]

_INITIAL_ROWS = 1024  # memory rows to start with when the run's length is unknown
_PREALLOCATED_ROWS = 1 << 16  # above this, the memory grows as the run goes


@dataclass(frozen=True, slots=True)
class SavedFile:
    """Where the dataset went, how big it is and what it holds.

    ``transitions`` and ``episodes`` (complete ones) count the file, which holds fewer
    than the run collected when the memory wrapped (``--memory-size``).
    """

    path: Path
    size_bytes: int
    transitions: int
    episodes: int


def default_output(env_id: str, folder: Path = Path("runs")) -> Path:
    """``runs/<ENV_ID>-<timestamp>.pt``, made unique if a file of that name exists."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", env_id).strip("-") or "env"
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = folder / f"{safe}-{stamp}.pt"
    k = 1
    while path.exists():
        path = folder / f"{safe}-{stamp}-{k}.pt"
        k += 1
    return path


class CollectJob:
    """Collect ``settings.env_id`` into a memory and save it.

    Use: ``job = CollectJob(settings)``; ``job.start()`` builds the envs (``job.mode``
    says which mode ``auto`` picked); ``job.run(progress)``; ``job.save()``; ``job.close()``.
    ``job.stop()`` (e.g. from a signal handler) ends ``run`` after the current step.
    From ``start()`` to the end of ``save()`` the job holds its output's lock: another
    writer of that file or folder is refused meanwhile (``OutputLockedError``).

    Raises:
        ConfigError: Invalid settings (checked before any env is built).
        OutputExistsError: The output exists and ``overwrite`` is not set.
        OutputError: The output is a folder, or its folder is read-only or not writable.
    """

    def __init__(self, settings: CollectSettings) -> None:
        from expcli.envs.env_ids import check_env_id

        self.settings = settings.validate()
        if settings.mode == "envpool":
            from expcli.envs.envpool_envs import check_envpool_id

            check_envpool_id(settings.env_id)
        else:
            check_env_id(settings.env_id)
        if settings.mode == "vector":
            require_vector_entry_point(settings.env_id)
        from expcli.envs.env_wrappers import describe_wrappers, portable_spec

        self.wrapper_descriptions = describe_wrappers(settings.wrappers)
        self.wrappers = [portable_spec(spec) for spec in settings.wrappers]
        self.output = Path(settings.output) if settings.output else default_output(settings.env_id)
        from expcli.collect.folder_run import is_folder_output

        self.to_folder = is_folder_output(self.output)
        if self.output.exists() and not settings.overwrite and not settings.resuming:
            with OutputLock(self.output):  # a writer at work is named, not the output it makes
                pass
            raise OutputExistsError(self.output)
        from expcli.formats import format_from_suffix
        from expcli.formats.checked_write import check_can_write

        # a folder in the way or a read-only one: say so now
        check_can_write(self.output, folder=self.to_folder)

        self.format = "folder" if self.to_folder else format_from_suffix(self.output)
        self._lock = OutputLock(self.output)
        self.sink: Any = None  # a ShardSink, for a folder output or a spooled file
        self.spool: Path | None = None  # a file output's spool folder (``spool_run``)
        # A folder run's segments (one per --resume), the whole run's targets when
        # resumed, and the (steps, env steps) of the segments before this one.
        self.segments: list[dict[str, Any]] = []
        self.targets: dict[str, int | None] = {}
        self.before = (0, 0)
        if settings.compression != "none" and self.format != "hdf5":
            from expcli.errors import ConfigError

            raise ConfigError(f"--compression applies to .h5/.hdf5 output, not {self.output}")
        self.mode = settings.mode
        self.probes: list[Probe] = []
        self.mode_differences: list[str] = []  # what --force-mode let through
        self.engine: dict[str, Any] = {"gym_spec": True}  # see _engine_metadata
        self.env: Any = None
        self.collector: Any = None  # a Collector, or a RolloutCollector (ray modes)
        self.policy_seed: int | None = None  # rollout actors' random streams
        self.stats: CollectStats | None = None

    def start(self) -> None:
        """Take the output's lock, then build the envs, the policy and the memory.

        The lock (``formats.output_lock``) is held until ``save()`` ends, so that no
        other writer (collect, ``--resume``, ``--overwrite``, convert) touches the output
        meanwhile.

        Raises:
            OutputLockedError: Another process writes the output; nothing was changed.
            OutputExistsError: The output appeared since the job was made.
        """
        self._lock.acquire()
        try:
            s = self.settings
            if self.output.exists() and not s.overwrite and not s.resuming:
                raise OutputExistsError(self.output)  # a writer that ended meanwhile made it
            self._start()
        except BaseException:
            self._lock.release()
            raise

    def _start(self) -> None:
        s = self.settings
        asynchronous = None if s.asynchronous == "none" else s.asynchronous
        if s.mode == "auto":
            # The probed envs are closed: the run's are built afresh, as in any other mode.
            self.mode, self.probes = choose_mode(
                s.env_id,
                s.envs,
                asynchronous,
                s.env_kwargs,
                seed=s.seed,
                num_cpus=s.num_cpus,
                step_timeout=s.step_timeout_seconds,
                wrappers=self.wrappers,
                infos=s.infos,
            )
        from expcli.collect.rollout_job import build_fleet, rollout_applies

        if rollout_applies(s, self.mode):
            self.env, self.policy_seed = build_fleet(s, self.mode, self.wrappers)
        elif self.mode == "vector":
            self.env, self.mode_differences = build_checked_vector(
                s.env_id, s.envs, s.env_kwargs, force=s.force_mode
            )
        else:
            self.env = build_env(
                self.mode,
                s.env_id,
                s.envs,
                asynchronous,
                s.env_kwargs,
                num_cpus=s.num_cpus,
                ray_address=s.ray_address,
                step_timeout=s.step_timeout_seconds,
                wrappers=self.wrappers,
                seed=s.seed,
            )
        try:
            self.engine = _engine_metadata(self.env, s.env_id, s.env_kwargs)
            self.collector = self._collector()
            if self.to_folder or self.spool is not None:
                from expcli.collect.folder_run import open_sink

                self.sink = open_sink(self)
        except BaseException:
            self.close()
            raise

    def _collector(self) -> Any:
        from expcli.collect.policies import check_actions, make_policy
        from expcli.collect.steppers import make_stepper
        from expcli.memory import RandomMemory

        s = self.settings
        stepper = self.env if self.policy_seed is not None else make_stepper(self.env)
        policy = make_policy(
            s.policy, stepper.observation_space, stepper.action_space, s.envs, s.seed
        )
        self.policy_description = dict(getattr(policy, "description", {"spec": s.policy}))
        from expcli.collect.spool_run import spool_folder

        self.spool = spool_folder(self, stepper)
        if self.to_folder or self.spool is not None:
            from expcli.collect.folder_run import staging_rows

            rows, grow = staging_rows(self, stepper), False
        else:
            check_run_fits(
                stepper.observation_space, stepper.action_space, s.envs, s.memory_size, s.steps
            )
        if self.to_folder or self.spool is not None:
            pass
        elif s.memory_size is not None:
            rows, grow = s.memory_size, False
        elif s.steps is not None:
            # Preallocate the rows that fit the run, but grow towards a huge one instead.
            needed = -(-s.steps // s.envs)
            rows, grow = min(needed, _PREALLOCATED_ROWS), needed > _PREALLOCATED_ROWS
        else:
            rows, grow = _INITIAL_ROWS, True
        memory = RandomMemory(rows, s.envs, device="cpu")

        if self.policy_seed is not None:
            from expcli.collect.rollout_collector import RolloutCollector

            return RolloutCollector(
                self.env,
                memory,
                seed=self.policy_seed,
                grow=grow,
                rewards_dtype=s.rewards_dtype,
                chunk_steps=s.chunk_steps,
                chunk_timeout=s.chunk_timeout_seconds,
                restart_on_error=s.restart_on_error,
            )

        def check(actions: Any) -> Any:
            return check_actions(actions, stepper.action_space, s.envs, s.policy)

        return Collector(
            self.env,
            memory,
            policy,
            seed=s.seed,
            infos=s.infos,
            grow=grow,
            check_actions=check,
            rewards_dtype=s.rewards_dtype,
        )

    @property
    def running(self) -> Any:
        """The collector that ``start()`` built.

        Raises:
            OrderError: ``start()`` has not been called.
        """
        if self.collector is None:
            raise OrderError("the collect job has not started: call start() first")
        return self.collector

    def run(self, progress: Callable[[Progress], None] | None = None) -> CollectStats:
        """Collect until the settings' steps or episodes (or ``stop()``).

        Raises:
            OrderError: ``start()`` has not been called.
        """
        collector = self.running
        s = self.settings
        try:
            self.stats = collector.collect(s.steps, s.episodes, progress)
        finally:
            self.stats = self.stats or self._stats_so_far()
        return self.stats

    def _stats_so_far(self) -> CollectStats:
        collector = self.running
        return CollectStats(
            steps=collector.steps_stored,
            env_steps=collector.env_steps,
            episodes=collector.tracker.summary(),
            elapsed=float("nan"),
            interrupted=True,
            dropped=0,
        )

    def stop(self) -> None:
        """End ``run`` after the current step; a step that hangs is given up after a second."""
        if self.collector is not None:
            self.collector.stop()
        interrupt = getattr(self.env, "interrupt", None)
        if interrupt is not None:
            interrupt()

    def dataset(self) -> Dataset:
        """What was collected, trimmed to the rows written, with the run's metadata."""
        memory = self.running.memory
        memory.metadata = self._metadata()
        dataset: Dataset = memory.to_dataset()
        if not memory.filled:
            rows = memory.memory_index
            tensors = {name: array[:rows] for name, array in dataset.tensors.items()}
            state = CircularState(0, 0, rows > 0, memory.state.written)
            dataset = Dataset(tensors, state, dataset.metadata)
        return dataset

    def save(self, progress: Callable[[str, float], None] | None = None) -> SavedFile | None:
        """Write the dataset atomically to the output path.

        ``progress``: a spooled run's merge, as ``convert`` reports it.

        When the output cannot be written (a full disk, a read-only folder, a folder in
        the way), what was collected is saved instead, in the same format, to the system's
        temporary folder or else the current folder, and the error says where.

        Returns:
            What was written; None when nothing was collected (a run that failed or was
            stopped before its first row): then nothing is written, and a file already
            at the output path stays as it was. Either way the output's lock is released.

        Raises:
            OutputError: The output could not be written; its ``saved_to`` is where the
                data went instead (None when it could not be kept anywhere).
        """
        try:
            return self._save(progress)
        finally:
            self._lock.release()

    def _save(self, progress: Callable[[str, float], None] | None) -> SavedFile | None:
        from expcli.conversion import save

        if self.spool is not None:
            from expcli.collect.spool_run import merge_spool

            return merge_spool(self, progress)
        if self.sink is not None:
            from expcli.collect.folder_run import finish_folder

            return finish_folder(self)
        s = self.settings
        dataset = self.dataset()
        if len(dataset) == 0:
            return None
        compression = None if s.compression == "none" else s.compression
        try:
            path = save(dataset, self.output, overwrite=s.overwrite, compression=compression)
        except OutputError as error:
            if isinstance(error, OutputExistsError):
                raise
            from expcli.collect.rescue import save_elsewhere

            raise save_elsewhere(dataset, self.output, compression, error) from error
        episodes = dataset.metadata["collector"]["complete_episodes_in_file"]
        return SavedFile(path, path.stat().st_size, len(dataset), episodes)

    def write_failed(self, error: OutputError) -> OutputError:
        """A shard could not be written while collecting (a full disk): the error to raise.

        No more shards are written (one is missing, so later rows would not follow on);
        the shards written are kept and the error says where: a spooled run's in a folder
        renamed beside the target, a folder output's where they are (``--resume`` goes on).
        """
        kept = self._keep_shards(error)
        return kept if isinstance(kept, OutputError) else error

    def stopped_at_once(self) -> str | None:
        """A second Ctrl-C while collecting: keep the shards written; where, or None."""
        kept = self._keep_shards(KeyboardInterrupt())
        return str(kept) if str(kept) else None

    def _keep_shards(self, error: BaseException) -> BaseException:
        try:
            return self._keep_shards_written(error)
        finally:
            self._lock.release()  # the run ends here: no save() follows

    def _keep_shards_written(self, error: BaseException) -> BaseException:
        if self.sink is None:
            return error
        self.sink.close()
        if self.spool is not None:
            from expcli.collect.spool_run import keep_spool

            return keep_spool(self, error)
        rows = self.sink.writer.manifest.rows * self.settings.envs
        if rows == 0:
            return error
        note = (
            f"{self.output} holds the {rows:,} transitions of its complete shards "
            f"(`expcli collect --resume {self.output}` goes on"
        )
        if isinstance(error, OutputError):
            from expcli.collect.rescue import with_note

            return with_note(error, note + " once there is room)", self.output)
        return KeyboardInterrupt(note + ")")

    def info_notes(self) -> dict[str, str]:
        """``--infos``: the info keys skipped or changed (by ``repr``), and why."""
        columns = getattr(self.collector, "info_columns", None)
        return {} if columns is None else columns.notes()

    def close(self) -> None:
        """Close the envs (idempotent)."""
        env, self.env = self.env, None
        if env is not None:
            env.close()

    def _metadata(self, in_file: tuple[int, int] | None = None) -> dict[str, Any]:
        """The run's metadata.

        ``in_file``: (transitions, complete episodes) the output holds, counted from the memory when
        not given.
        """
        import gymnasium as gym
        import torch

        s = self.settings
        memory = self.running.memory
        stats = self.stats
        engine = dict(self.engine)
        envpool = engine.get("envpool", {})
        return {
            "env_id": s.env_id,
            "env_spec": _env_spec(s.env_id, s.env_kwargs) if engine.pop("gym_spec") else None,
            "env_kwargs": s.env_kwargs,
            "wrappers": self.wrapper_descriptions,
            **self.running.space_metadata(),
            "seed": s.seed,
            "collector": {
                "mode": self.mode,
                "forced_mode": bool(self.mode_differences),
                **({"mode_differences": self.mode_differences} if self.mode_differences else {}),
                **({"probes": [p.to_json() for p in self.probes]} if self.probes else {}),
                "asynchronous": s.asynchronous,
                "policy": self.policy_description,
                # The run's counts, then the file's: fewer when the memory wrapped.
                "steps": stats.steps if stats else None,
                "env_steps": stats.env_steps if stats else None,
                "episodes": stats.episodes.complete if stats else None,
                "transitions_in_file": len(memory) if in_file is None else in_file[0],
                "complete_episodes_in_file": (
                    int(memory.episodes().complete.sum()) if in_file is None else in_file[1]
                ),
                "interrupted": stats.interrupted if stats else None,
                "target_steps": s.steps,
                "target_episodes": s.episodes,
                **({"info_notes": notes} if (notes := self.info_notes()) else {}),
                **engine,
                **(self.running.metadata() if self.policy_seed is not None else {}),
            },
            **({"frame_stack": envpool["frame_stack"]} if "frame_stack" in envpool else {}),
            "versions": {
                "expcli": __version__,
                "gymnasium": gym.__version__,
                "torch": torch.__version__,
                "numpy": np.__version__,
                "python": platform.python_version(),
            },
        }


def _engine_metadata(env: Any, env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """EnvPool's part of the metadata, and whether Gymnasium's spec describes the run.

    ``envpool`` holds the task id, version, config and seeds; ``gym_spec`` says whether
    Gymnasium's spec of ``env_id`` describes the envs that ran.
    """
    from expcli.envs.envpool_envs import EnvPoolEnvs, gym_equivalent

    if not isinstance(env, EnvPoolEnvs):
        return {"gym_spec": True}
    return {"gym_spec": gym_equivalent(env_id, env_kwargs), "envpool": env.metadata()}


def _env_spec(env_id: str, env_kwargs: dict[str, Any]) -> Any:
    """Gymnasium's JSON of the env spec, when the spec can be serialised."""
    import dataclasses
    import json

    import gymnasium as gym

    from expcli.envs.env_ids import bare_id

    try:
        spec = gym.spec(bare_id(env_id))
        if env_kwargs:
            spec = dataclasses.replace(spec, kwargs={**spec.kwargs, **env_kwargs})
        return json.loads(spec.to_json())
    except Exception:
        return None
