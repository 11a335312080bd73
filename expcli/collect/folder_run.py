"""A collect run whose output is a sharded dataset folder: staging, disk check, the end.

The rule for the output: a path with no format suffix (``runs/big``, ``runs/big/``), or
an existing sharded dataset folder, is written as a folder. The run's memory is then a
staging area of one shard's rows (``ShardSink``), so memory stays flat whatever the run's
length; the folder's manifest carries the run's settings and its segments, so that
``--resume`` (``resume``) can continue it.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from expcli.collect.memory_check import sample_bytes
from expcli.collect.shard_sink import DEFAULT_SHARD_SIZE, ShardSink, parse_shard_size
from expcli.errors import ConfigError, OutputError
from expcli.formats.sharded import Manifest, is_folder_target, is_sharded_folder

if TYPE_CHECKING:
    from expcli.collect.job import CollectJob, SavedFile

__all__ = ["finish_folder", "is_folder_output", "open_sink", "staging_rows", "transition_bytes"]

_REWARD_AND_FLAGS = 4 + 1 + 1
_SETTINGS_KEY = "collect_settings"  # under "collector" in the metadata: what --resume reruns


def is_folder_output(output: Path) -> bool:
    """Whether ``output`` names a sharded folder: no suffix, or an existing such folder."""
    return is_folder_target(output)


def transition_bytes(stepper: Any) -> int:
    """Bytes one stored transition takes (observation twice, action, reward, two flags)."""
    return (
        2 * sample_bytes(stepper.observation_space)
        + sample_bytes(stepper.action_space)
        + _REWARD_AND_FLAGS
    )


def staging_rows(job: CollectJob, stepper: Any) -> int:
    """Rows of the staging memory (one shard's); refuses a run that will not fit on disk.

    Raises:
        ConfigError: ``--memory-size`` with a folder, a bad ``--shard-size``, or a
            ``--steps`` run estimated larger than the free space of the output's disk.
    """
    from expcli.formats.checked_write import free_bytes
    from expcli.host_memory import format_bytes

    s = job.settings
    if s.memory_size is not None:
        raise ConfigError(
            "--memory-size keeps the newest rows of a memory; a folder output stores every "
            "row (leave --memory-size out, or name a file)"
        )
    per = transition_bytes(stepper)
    rows, size = parse_shard_size(s.shard_size or DEFAULT_SHARD_SIZE)
    if rows is None:
        assert size is not None
        rows = max(1, size // (per * s.envs))
    if s.steps is not None and job.spool is not None:
        rows = min(rows, -(-s.steps // s.envs))  # a spooled run shorter than a shard
    if s.steps is not None:
        needed = s.steps * per * (1 if job.spool is None else 2)  # spool and file
        parent = job.output if job.output.is_dir() else job.output.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        free = free_bytes(parent)
        if free is not None and needed > free:
            raise ConfigError(
                f"--steps {s.steps:,} ({per:,} bytes per transition) needs about "
                f"{format_bytes(needed)} on disk, more than the {format_bytes(free)} free in "
                f"{parent}; collect fewer steps or write elsewhere"
            )
    return int(rows)


def open_sink(job: CollectJob) -> ShardSink:
    """The sink of a folder run, its folder created or, with ``--resume``, opened.

    ``--overwrite`` replaces a sharded folder that stands there.
    """
    manifest: Manifest | None = None
    collector = job.running
    output = job.output
    if job.settings.resuming:
        from expcli.collect.resume import continue_folder

        manifest = continue_folder(job)
    else:
        if job.spool is None:  # a spooled file output is replaced when merged
            _clear(output)
        job.segments = [{"segment": 0, "seed": job.settings.seed, "first_row": 0}]
    folder = output if job.spool is None else job.spool
    return ShardSink(collector.memory, folder, lambda: _metadata(job), manifest)


def _clear(output: Path) -> None:
    """Remove what ``--overwrite`` replaces: a sharded folder, an empty one, or a file."""
    if not output.exists():
        return
    if output.is_dir() and not is_sharded_folder(output) and any(output.iterdir()):
        raise OutputError(
            "is a folder that is not a sharded dataset; refusing to write into it", path=output
        )
    if output.is_dir():
        shutil.rmtree(output)
    else:
        output.unlink()


def _metadata(job: CollectJob, in_file: tuple[int, int] | None = None) -> dict[str, Any]:
    metadata = job._metadata(in_file or (0, 0))
    if job.spool is not None:  # a file's metadata, as an in-memory run writes it
        return metadata
    metadata["seed"] = job.segments[0]["seed"]
    settings = dataclasses.asdict(job.settings)
    settings = {k: v for k, v in settings.items() if k not in ("output", "quiet", "resuming")}
    settings["seed"] = job.segments[0]["seed"]
    for key in ("steps", "episodes"):
        settings[key] = job.targets.get(key, settings[key])
    metadata["collector"][_SETTINGS_KEY] = settings
    metadata["collector"]["segments"] = job.segments
    if "target_steps" in metadata["collector"]:
        metadata["collector"]["target_steps"] = settings["steps"]
        metadata["collector"]["target_episodes"] = settings["episodes"]
    return metadata


def finish_folder(job: CollectJob) -> SavedFile | None:
    """Flush the staging area as a last shard and write the final manifest."""
    from expcli.collect.job import SavedFile

    sink: ShardSink = job.sink
    collector = job.running
    summary = collector.tracker.summary()
    n = job.settings.envs
    rows = sink.rows + collector.memory.memory_index
    before = job.before
    metadata = _metadata(job, (rows * n, summary.complete))
    collector = metadata["collector"]
    if job.stats is not None:  # the whole run's counts, resumed segments included
        collector["steps"] = before[0] + job.stats.steps
        collector["env_steps"] = before[1] + job.stats.env_steps
        collector["episodes"] = summary.complete
    sink.finish(metadata)
    if rows == 0:
        return None
    folder = sink.writer.folder
    size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    return SavedFile(folder, size, rows * n, summary.complete)
