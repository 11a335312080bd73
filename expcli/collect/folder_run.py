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
from expcli.collect.output_parts import MetadataProvider, RunRows
from expcli.collect.saved_file import SavedFile
from expcli.collect.settings import CollectSettings
from expcli.collect.shard_sink import DEFAULT_SHARD_SIZE, ShardSink, parse_shard_size
from expcli.errors import ConfigError, OutputError
from expcli.formats.rows import WritePlan
from expcli.formats.sharded import Manifest, is_sharded_folder
from expcli.host_memory import format_bytes

if TYPE_CHECKING:
    from expcli.collect.collector import CollectStats
    from expcli.collect.step_outcome import HasSpaces

__all__ = ["FolderOutput", "staging_rows", "transition_bytes"]

_REWARD_AND_FLAGS = 4 + 1 + 1
_SETTINGS_KEY = "collect_settings"  # under "collector" in the metadata: what --resume reruns


def transition_bytes(stepper: HasSpaces) -> int:
    """Bytes one stored transition takes (observation twice, action, reward, two flags)."""
    return (
        2 * sample_bytes(stepper.observation_space)
        + sample_bytes(stepper.action_space)
        + _REWARD_AND_FLAGS
    )


def staging_rows(
    settings: CollectSettings,
    output: Path,
    per_transition: int,
    *,
    spooled: bool,
    derivable: int = 0,
) -> int:
    """Rows of the staging memory (one shard's); refuses a run that will not fit on disk.

    ``per_transition``: bytes of one transition (``transition_bytes``); ``spooled``: the
    folder is a file output's spool (the file is written too); ``derivable``: bytes of a
    transition that the once form may leave off the disk (its next observation), so that
    the estimate stays a lower bound and only a run that cannot fit is refused.

    Raises:
        ConfigError: ``--memory-size`` with a folder, a bad ``--shard-size``, or a
            ``--steps`` run estimated larger than the free space of the output's disk.
    """
    from expcli.formats.checked_write import free_bytes

    s = settings
    if s.memory_size is not None:
        raise ConfigError(
            "--memory-size keeps the newest rows of a memory; a folder output stores every "
            "row (leave --memory-size out, or name a file)"
        )
    per = per_transition
    rows, size = parse_shard_size(s.shard_size or DEFAULT_SHARD_SIZE)
    if rows is None:
        assert size is not None
        rows = max(1, size // (per * s.envs))
    if s.steps is not None and spooled:
        rows = min(rows, -(-s.steps // s.envs))  # a spooled run shorter than a shard
    if s.steps is not None:
        needed = s.steps * (per - derivable) * (2 if spooled else 1)  # spool and file
        parent = output if output.is_dir() else output.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        free = free_bytes(parent)
        if free is not None and needed > free:
            raise ConfigError(
                f"--steps {s.steps:,} ({per - derivable:,} bytes per transition) needs at least "
                f"{format_bytes(needed)} on disk, more than the {format_bytes(free)} free in "
                f"{parent}; collect fewer steps or write elsewhere"
            )
    return int(rows)


class FolderOutput:
    """A run's rows written as the shards of a folder as they come, then its manifest.

    Its folder is created, or with ``settings.resuming`` opened and continued
    (``resume.continue_folder``); ``--overwrite`` replaces a sharded folder that stands
    there. The manifest carries the run's settings and segments (what ``--resume``
    reruns), unless the folder is a file output's spool (``spooled``): then its metadata
    is the file's.

    Args:
        rows: The staging memory (one shard's rows) and the run's episode tracker.
        plan: The folder's write: its path (``target``), shard format, their compression
            and how they store next observations (``ShardSink``).
        settings: The run's settings (a resumed run's are left to collect what remains).
        metadata: The run's metadata.
        spooled: The folder is a spool, merged into a file at the end.
    """

    def __init__(
        self,
        rows: RunRows,
        plan: WritePlan,
        settings: CollectSettings,
        metadata: MetadataProvider,
        *,
        spooled: bool = False,
    ) -> None:
        self.rows = rows
        self.folder = folder = plan.target
        self.settings = settings
        self.spooled = spooled
        self._metadata = metadata
        manifest: Manifest | None = None
        self.targets: dict[str, int | None] = {}
        self.before = (0, 0)  # (steps, env steps) of the segments before this one
        if settings.resuming:
            from expcli.collect.resume import continue_folder

            went_on = continue_folder(folder, settings, rows)
            manifest, self.segments = went_on.manifest, went_on.segments
            self.targets, self.before = went_on.targets, went_on.before
        else:
            if not spooled:  # a spooled file output is replaced when merged
                _clear(folder)
            self.segments = [{"segment": 0, "seed": settings.seed, "first_row": 0}]
        self.sink = ShardSink(rows.memory, plan, lambda: self.metadata(), manifest)

    def metadata(self, in_file: tuple[int, int] | None = None) -> dict[str, Any]:
        """The run's metadata as the folder records it (``in_file``: what it holds)."""
        metadata = self._metadata(in_file or (0, 0))
        if self.spooled:  # a file's metadata, as an in-memory run writes it
            return metadata
        metadata["seed"] = self.segments[0]["seed"]
        settings = dataclasses.asdict(self.settings)
        settings = {k: v for k, v in settings.items() if k not in ("output", "quiet", "resuming")}
        settings["seed"] = self.segments[0]["seed"]
        for key in ("steps", "episodes"):
            settings[key] = self.targets.get(key, settings[key])
        metadata["collector"][_SETTINGS_KEY] = settings
        metadata["collector"]["segments"] = self.segments
        if "target_steps" in metadata["collector"]:
            metadata["collector"]["target_steps"] = settings["steps"]
            metadata["collector"]["target_episodes"] = settings["episodes"]
        return metadata

    def finish(self, stats: CollectStats | None) -> SavedFile | None:
        """Flush the staging area as a last shard and write the final manifest.

        ``stats``: this segment's counts (None: the run stopped before they were known).
        """
        sink = self.sink
        summary = self.rows.tracker.summary()
        n = self.settings.envs
        rows = sink.rows + self.rows.memory.memory_index
        before = self.before
        metadata = self.metadata((rows * n, summary.complete))
        collector = metadata["collector"]
        if stats is not None:  # the whole run's counts, resumed segments included
            collector["steps"] = before[0] + stats.steps
            collector["env_steps"] = before[1] + stats.env_steps
            collector["episodes"] = summary.complete
        sink.finish(metadata)
        if rows == 0:
            return None
        folder = sink.writer.folder
        size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
        return SavedFile(folder, size, rows * n, summary.complete)

    def keep(self, error: BaseException) -> BaseException:
        """The run stopped while collecting (a shard not written, a second Ctrl-C).

        Returns:
            What to raise: ``error`` with a note saying the folder keeps its complete
            shards (``--resume`` goes on), or ``error`` itself when there are none.
        """
        self.sink.close()
        output = self.folder
        rows = self.sink.writer.manifest.rows * self.settings.envs
        if rows == 0:
            return error
        note = (
            f"{output} holds the {rows:,} transitions of its complete shards "
            f"(`expcli collect --resume {output}` goes on"
        )
        if isinstance(error, OutputError):
            from expcli.collect.rescue import with_note

            return with_note(error, note + " once there is room)", output)
        return KeyboardInterrupt(note + ")")


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
