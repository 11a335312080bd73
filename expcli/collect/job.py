"""One collect run from settings to file: envs, policy, memory, collection, atomic save.

This is the library side of ``expcli collect``: the command only parses options, draws
the progress bar and the summary, and turns signals into ``stop()``.
"""

from __future__ import annotations

import contextlib
import datetime
import platform
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli._version import __version__
from expcli.collect._output_plan import output_plan
from expcli.collect.collector import Collector, CollectStats, Progress
from expcli.collect.engine_spec import EngineRequest, Envs
from expcli.collect.engines import ENGINES, CollectMode
from expcli.collect.env_modes import Probe, choose_mode
from expcli.collect.folder_run import (
    FolderOutput,
    staging_rows,
    transition_bytes,
)
from expcli.collect.memory_check import check_run_fits, derivable_bytes
from expcli.collect.output_parts import RunRows
from expcli.collect.saved_file import SavedFile
from expcli.collect.settings import CollectSettings
from expcli.collect.shard_sink import ShardSink
from expcli.collect.single_file import save_file
from expcli.collect.spool_run import SpooledFile, spool_folder
from expcli.errors import (
    ExpcliError,
    OrderError,
    OutputError,
    OutputExistsError,
)
from expcli.files.output_lock import OutputLock
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState, FramesForm

if TYPE_CHECKING:
    from expcli.collect.rollout.collector import RolloutCollector
    from expcli.collect.rollout.fleet import RolloutFleet
    from expcli.collect.step_outcome import HasSpaces

__all__ = ["CollectJob", "SavedFile", "default_output"]

_INITIAL_ROWS = 1024  # memory rows to start with when the run's length is unknown
_PREALLOCATED_ROWS = 1 << 16  # above this, the memory grows as the run goes


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


@contextlib.contextmanager
def _recorded(settings: CollectSettings) -> Iterator[None]:
    """Errors of a ``--resume`` run's envs name the manifest whose settings made them."""
    try:
        yield
    except ExpcliError as e:
        if not settings.resuming or settings.output is None:
            raise
        place = Path(settings.output) / "manifest.json"
        raise e.located(place, "collector.collect_settings") from e.__cause__


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
        self.settings = settings.validate()
        engine = ENGINES.get(settings.mode)
        with _recorded(settings):
            if engine is None:  # auto: its candidates all take Gymnasium's ids
                from expcli.envs.env_ids import check_env_id

                check_env_id(settings.env_id)
            else:
                engine.check_id(settings.env_id)
        from expcli.envs.env_wrappers import describe_wrappers, portable_spec

        self.wrapper_descriptions = describe_wrappers(settings.wrappers)
        self.wrappers = [portable_spec(spec) for spec in settings.wrappers]
        self.output = Path(settings.output) if settings.output else default_output(settings.env_id)
        from expcli.formats.sharded import is_folder_target

        # an existing sharded folder stays one whatever its name (``--resume``)
        self.to_folder = is_folder_target(self.output)
        if self.output.exists() and not settings.overwrite and not settings.resuming:
            with OutputLock(self.output):  # a writer at work is named, not the output it makes
                pass
            raise OutputExistsError(self.output)
        from expcli.formats.checked_write import check_can_write

        # a folder in the way or a read-only one: say so now
        check_can_write(self.output, folder=self.to_folder)

        self._lock = OutputLock(self.output)
        self.spool: Path | None = None  # a file output's spool folder (``spool_run``)
        # the output written as the run goes (a folder, a spooled file); None: in memory
        self.streamed: FolderOutput | SpooledFile | None = None
        # the output's write, checked once and handed whole to the output kind that writes it
        self.plan = output_plan(settings, self.output, to_folder=self.to_folder)
        self.mode: CollectMode = settings.mode
        self.probes: list[Probe] = []
        self.mode_differences: list[str] = []  # what --force-mode let through
        self.engine: dict[str, Any] = {"gym_spec": True}  # see _engine_metadata
        self.env: Envs | None = None  # the engine's envs, or the rollout actors
        self._fleet: RolloutFleet | None = None  # the rollout actors (ray modes)
        self.collector: Collector | RolloutCollector | None = None
        self.policy_seed: int | None = None  # rollout actors' random streams
        self.stats: CollectStats | None = None

    def start(self) -> None:
        """Take the output's lock, then build the envs, the policy and the memory.

        The lock (``files.output_lock``) is held until ``save()`` ends, so that no
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
            with _recorded(s):
                self._start()
        except BaseException:
            self._lock.release()
            raise

    def _start(self) -> None:
        s = self.settings
        if s.mode is CollectMode.AUTO:
            # The probed envs are closed: the run's are built afresh, as in any other mode.
            self.mode, self.probes = choose_mode(
                s.env_id,
                s.envs,
                s.asynchronous,
                s.env_kwargs,
                seed=s.seed,
                num_cpus=s.num_cpus,
                step_timeout=s.step_timeout_seconds,
                wrappers=self.wrappers,
                infos=s.infos,
                steps=s.steps,
            )
        engine = ENGINES[self.mode]
        from expcli.collect.rollout.job import build_fleet, rollout_applies

        if rollout_applies(s, engine):
            self._fleet, self.policy_seed = build_fleet(s, engine, self.wrappers)
            self.env = self._fleet
        else:
            built = engine.build(
                EngineRequest(
                    s.env_id,
                    s.envs,
                    s.asynchronous,
                    s.env_kwargs,
                    num_cpus=s.num_cpus,
                    ray_address=s.ray_address,
                    step_timeout=s.step_timeout_seconds,
                    wrappers=tuple(self.wrappers),
                    seed=s.seed,
                    force=s.force_mode,
                )
            )
            self.env, self.mode_differences = built.envs, built.differences
        try:
            self.engine = _engine_metadata(self.env, s.env_id, s.env_kwargs)
            self.collector = self._collector()
            self.streamed = self._streamed_output()
        except BaseException:
            self.close()
            raise

    def _collector(self) -> Collector | RolloutCollector:
        from expcli.collect.policies import check_actions, make_policy
        from expcli.collect.steppers import make_stepper
        from expcli.memory import RandomMemory

        s = self.settings
        fleet = self._fleet
        stepper: HasSpaces = make_stepper(self.env) if fleet is None else fleet
        policy = make_policy(
            s.policy, stepper.observation_space, stepper.action_space, s.envs, s.seed
        )
        self.policy_description = dict(getattr(policy, "description", {"spec": s.policy}))
        per = transition_bytes(stepper)
        self.spool = spool_folder(s, self.output, per, to_folder=self.to_folder)
        if self.to_folder or self.spool is not None:
            derivable = (
                derivable_bytes(stepper.observation_space) if s.frames is FramesForm.ONCE else 0
            )
            spooled = self.spool is not None
            rows = staging_rows(s, self.output, per, spooled=spooled, derivable=derivable)
            grow = False
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

        if fleet is not None and self.policy_seed is not None:
            from expcli.collect.rollout.collector import RolloutCollector

            return RolloutCollector(
                fleet,
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

    def _streamed_output(self) -> FolderOutput | SpooledFile | None:
        """The folder (created, or continued by ``--resume``) or spool the run streams to."""
        collector = self.running
        rows = RunRows(collector.memory, collector.tracker)
        if self.spool is not None:
            return SpooledFile(rows, self.plan, self.spool, self.settings, self.metadata)
        if self.to_folder:
            return FolderOutput(rows, self.plan, self.settings, self.metadata)
        return None

    @property
    def sink(self) -> ShardSink | None:
        """The shard writer of a folder output or a spooled file (None: in memory)."""
        return None if self.streamed is None else self.streamed.sink

    @property
    def before(self) -> tuple[int, int]:
        """(steps, env steps) of a resumed folder run's segments before this one."""
        return (0, 0) if self.streamed is None else self.streamed.before

    @property
    def running(self) -> Collector | RolloutCollector:
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
        memory.metadata = self.metadata()
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
        streamed = self.streamed
        if isinstance(streamed, SpooledFile):
            return streamed.merge(self.stats, progress)
        if streamed is not None:
            return streamed.finish(self.stats)
        return save_file(self.dataset(), self.plan)

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
        return error if self.streamed is None else self.streamed.keep(error)

    def info_notes(self) -> dict[str, str]:
        """``--infos``: the info keys skipped or changed (by ``repr``), and why."""
        columns = getattr(self.collector, "info_columns", None)
        return {} if columns is None else columns.notes()

    def close(self) -> None:
        """Close the envs (idempotent)."""
        env, self.env = self.env, None
        if env is not None:
            env.close()

    def metadata(self, in_file: tuple[int, int] | None = None) -> dict[str, Any]:
        """The run's metadata (what the output kinds are given to ask for it).

        ``in_file``: (transitions, complete episodes) the output holds, counted from the memory when
        not given.
        """
        import gymnasium as gym

        from expcli.envs.render_rate import declared_fps

        s = self.settings
        collector = self.running
        memory = collector.memory
        stats = self.stats
        engine = dict(self.engine)
        envpool = engine.get("envpool", {})
        gym_spec = engine.pop("gym_spec")
        return {
            "env_id": s.env_id,
            "env_spec": _env_spec(s.env_id, s.env_kwargs) if gym_spec else None,
            "env_kwargs": s.env_kwargs,
            "render_fps": declared_fps(s.env_id) if gym_spec else None,
            "wrappers": self.wrapper_descriptions,
            **collector.space_metadata(),
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
                **({} if isinstance(collector, Collector) else collector.metadata()),
            },
            **({"frame_stack": envpool["frame_stack"]} if "frame_stack" in envpool else {}),
            "versions": {
                "expcli": __version__,
                "gymnasium": gym.__version__,
                "torch": _installed_version("torch"),
                "numpy": np.__version__,
                "python": platform.python_version(),
            },
        }


def _installed_version(package: str) -> str | None:
    """The version of an installed package, read from its metadata: nothing is imported.

    torch's own ``__version__`` carries a local part (``2.13.0+cpu``) that the metadata keeps.
    """
    import sys
    from importlib import metadata

    module = sys.modules.get(package)
    if module is not None:
        return str(getattr(module, "__version__", None))
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _engine_metadata(env: Envs, env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
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
