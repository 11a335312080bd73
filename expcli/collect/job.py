"""One collect run from settings to file: envs, policy, memory, collection, atomic save.

This is the library side of ``expcli collect``: the command only parses options, draws
the progress bar and the summary, and turns signals into ``stop()``.
"""

from __future__ import annotations

import datetime
import os
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
from expcli.errors import OutputError, OutputExistsError
from expcli.formats.dataset import Dataset
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

    Raises:
        ConfigError: Invalid settings (checked before any env is built).
        OutputExistsError: The output exists and ``overwrite`` is not set.
        OutputError: The output is a folder, or its folder is read-only or not writable.
    """

    def __init__(self, settings: CollectSettings) -> None:
        from expcli.envs.parallel_env import check_env_id

        self.settings = settings.validate()
        check_env_id(settings.env_id)
        if settings.mode == "vector":
            require_vector_entry_point(settings.env_id)
        from expcli.envs.env_wrappers import describe_wrappers, portable_spec

        self.wrapper_descriptions = describe_wrappers(settings.wrappers)
        self.wrappers = [portable_spec(spec) for spec in settings.wrappers]
        self.output = Path(settings.output) if settings.output else default_output(settings.env_id)
        if self.output.exists() and not settings.overwrite:
            raise OutputExistsError(self.output)
        from expcli.formats import format_from_suffix
        from expcli.formats.checked_write import check_can_write

        check_can_write(self.output)  # a folder in the way or a read-only one: say so now

        self.format = format_from_suffix(self.output)
        if settings.compression != "none" and self.format != "hdf5":
            from expcli.errors import ConfigError

            raise ConfigError(f"--compression applies to .h5/.hdf5 output, not {self.output}")
        self.mode = settings.mode
        self.probes: list[Probe] = []
        self.mode_differences: list[str] = []  # what --force-mode let through
        self.env: Any = None
        self.collector: Collector | None = None
        self.stats: CollectStats | None = None

    def start(self) -> None:
        """Build the envs, the policy and the memory."""
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
            )
        if self.mode == "vector":
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
            )
        try:
            self.collector = self._collector()
        except BaseException:
            self.close()
            raise

    def _collector(self) -> Collector:
        from expcli.collect.policies import check_actions, make_policy
        from expcli.collect.steppers import make_stepper
        from expcli.memory import RandomMemory

        s = self.settings
        stepper = make_stepper(self.env)
        policy = make_policy(
            s.policy, stepper.observation_space, stepper.action_space, s.envs, s.seed
        )
        self.policy_description = dict(getattr(policy, "description", {"spec": s.policy}))
        check_run_fits(
            stepper.observation_space, stepper.action_space, s.envs, s.memory_size, s.steps
        )
        if s.memory_size is not None:
            rows, grow = s.memory_size, False
        elif s.steps is not None:
            # Preallocate the rows that fit the run, but grow towards a huge one instead.
            needed = -(-s.steps // s.envs)
            rows, grow = min(needed, _PREALLOCATED_ROWS), needed > _PREALLOCATED_ROWS
        else:
            rows, grow = _INITIAL_ROWS, True
        memory = RandomMemory(rows, s.envs, device="cpu")

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

    def run(self, progress: Callable[[Progress], None] | None = None) -> CollectStats:
        """Collect until the settings' steps or episodes (or ``stop()``)."""
        assert self.collector is not None, "call start() first"
        s = self.settings
        try:
            self.stats = self.collector.collect(s.steps, s.episodes, progress)
        finally:
            self.stats = self.stats or self._stats_so_far()
        return self.stats

    def _stats_so_far(self) -> CollectStats:
        assert self.collector is not None
        return CollectStats(
            steps=self.collector.steps_stored,
            env_steps=self.collector.env_steps,
            episodes=self.collector.tracker.summary(),
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
        assert self.collector is not None
        memory = self.collector.memory
        memory.metadata = self._metadata()
        dataset: Dataset = memory.to_dataset()
        if not memory.filled:
            rows = memory.memory_index
            tensors = {name: array[:rows] for name, array in dataset.tensors.items()}
            state = CircularState(0, 0, rows > 0)
            dataset = Dataset(tensors, state, dataset.metadata)
        return dataset

    def save(self) -> SavedFile | None:
        """Write the dataset atomically to the output path.

        When the output cannot be written (a full disk, a read-only folder, a folder in
        the way), what was collected is saved instead, in the same format, to the system's
        temporary folder or else the current folder, and the error says where.

        Returns:
            What was written; None when nothing was collected (a run that failed or was
            stopped before its first row): then nothing is written, and a file already
            at the output path stays as it was.

        Raises:
            OutputError: The output could not be written; its ``saved_to`` is where the
                data went instead (None when it could not be kept anywhere).
        """
        from expcli.conversion import save

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
            raise _save_elsewhere(dataset, self.output, compression, error) from error
        episodes = dataset.metadata["collector"]["complete_episodes_in_file"]
        return SavedFile(path, path.stat().st_size, len(dataset), episodes)

    def close(self) -> None:
        """Close the envs (idempotent)."""
        env, self.env = self.env, None
        if env is not None:
            env.close()

    def _metadata(self) -> dict[str, Any]:
        import gymnasium as gym
        import torch

        assert self.collector is not None
        s = self.settings
        memory = self.collector.memory
        stats = self.stats
        return {
            "env_id": s.env_id,
            "env_spec": _env_spec(s.env_id, s.env_kwargs),
            "env_kwargs": s.env_kwargs,
            "wrappers": self.wrapper_descriptions,
            **self.collector.space_metadata(),
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
                "transitions_in_file": len(memory),
                "complete_episodes_in_file": int(memory.episodes().complete.sum()),
                "interrupted": stats.interrupted if stats else None,
                "target_steps": s.steps,
                "target_episodes": s.episodes,
            },
            "versions": {
                "expcli": __version__,
                "gymnasium": gym.__version__,
                "torch": torch.__version__,
                "numpy": np.__version__,
                "python": platform.python_version(),
            },
        }


def _save_elsewhere(
    dataset: Dataset, output: Path, compression: str | None, error: OutputError
) -> OutputError:
    """Save ``dataset`` to the first fallback folder that takes it; the error to raise."""
    import tempfile

    from expcli.conversion import save

    tried: list[str] = []
    for folder in dict.fromkeys(Path(f).resolve() for f in (tempfile.gettempdir(), os.curdir)):
        if folder == output.parent.resolve():
            continue
        path = _unused_name(folder, output)
        try:
            save(dataset, path, overwrite=False, compression=compression)
        except OutputError:
            tried.append(str(folder))
            continue
        note = f"the {len(dataset):,} transitions collected were saved to {path} instead"
        return _with_note(error, note, path)
    note = f"saving what was collected to {' or '.join(tried) or 'another folder'} failed too"
    return _with_note(error, note, None)


def _unused_name(folder: Path, output: Path) -> Path:
    """``folder/NAME-rescued.SUFFIX``, numbered if taken (a CSV's sidecar included)."""
    k = 0
    while True:
        path = folder / f"{output.stem}-rescued{f'-{k}' if k else ''}{output.suffix}"
        if not any(os.path.lexists(f"{path}{extra}") for extra in ("", ".meta.json")):
            return path
        k += 1


def _with_note(error: OutputError, note: str, saved_to: Path | None) -> OutputError:
    assert error.path is not None
    return OutputError(
        f"{error.message}; {note}",
        path=error.path,
        errno=error.errno,
        needed=error.needed,
        free=error.free,
        saved_to=saved_to,
    )


def _env_spec(env_id: str, env_kwargs: dict[str, Any]) -> Any:
    """Gymnasium's JSON of the env spec, when the spec can be serialised."""
    import dataclasses
    import json

    import gymnasium as gym

    try:
        spec = gym.spec(env_id.rpartition(":")[2])
        if env_kwargs:
            spec = dataclasses.replace(spec, kwargs={**spec.kwargs, **env_kwargs})
        return json.loads(spec.to_json())
    except Exception:
        return None
