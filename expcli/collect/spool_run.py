"""A large collect run to a single file: spooled to shards beside it, then merged.

An in-memory run holds the whole run until it is written; a run that may not fit
comfortably (``SPOOL_ABOVE``, or a quarter of the memory available, whichever is less;
or a run of unknown length) streams instead, as a folder output does, into a hidden
temporary folder beside the target (``files.temp_names``: a dead run's is cleaned by the next
writer of that target). At the end the folder is converted to the file a slice of rows at
a time (the file lands atomically, as every write does) and removed. A merge that fails
or is interrupted (a second Ctrl-C) keeps the collected rows: the folder is renamed
``NAME-rescued`` and the error (or ``MergeInterrupted``) says so. So does a failure to
write the last shard, when earlier shards hold rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from expcli.collect.folder_run import FolderOutput
from expcli.collect.output_parts import MetadataProvider, RunRows
from expcli.collect.saved_file import SavedFile
from expcli.collect.settings import CollectSettings
from expcli.errors import OutputError
from expcli.formats.rows import WritePlan
from expcli.formats.table import SHARDED_FOLDER
from expcli.host_memory import available_bytes

if TYPE_CHECKING:
    from expcli.collect.collector import CollectStats

__all__ = ["SPOOL_ABOVE", "MergeInterrupted", "SpooledFile", "spool_folder"]

SPOOL_ABOVE = 256 * 10**6
"""Bytes of a run above which a file output streams through a spool folder."""


class MergeInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped a merge; ``note`` says where the collected rows are."""

    def __init__(self, note: str, kept: Path | None) -> None:
        super().__init__(note)
        self.note = note
        self.kept = kept


def spool_folder(
    settings: CollectSettings, output: Path, per_transition: int, *, to_folder: bool
) -> Path | None:
    """The spool folder of a file output that should stream, else None.

    ``--spool`` forces it and ``--no-spool`` forbids it; by default a run spools when it
    is estimated above the threshold (``per_transition`` bytes a transition), or when its
    length cannot be bounded (``--episodes`` of an env with no time limit).
    ``--memory-size`` runs stay in memory (they are bounded by it), and a folder output
    (``to_folder``) is written as it comes.
    """
    from expcli.formats.checked_write import remove_stale, temp_name

    s = settings
    if to_folder or s.memory_size is not None or s.spool is False:
        return None
    if not s.spool:
        size = _run_bytes(s, per_transition)
        if size is not None and size <= _threshold():
            return None
    remove_stale(output)
    return temp_name(output)


def _run_bytes(s: CollectSettings, per_transition: int) -> int | None:
    """The run's size at most, or None when unbounded (episodes without a time limit)."""
    if s.steps is not None:
        return s.steps * per_transition
    import gymnasium as gym

    from expcli.envs.env_ids import bare_id

    try:
        limit = gym.spec(bare_id(s.env_id)).max_episode_steps
    except Exception:  # an id gymnasium does not know (yet): its length is unknown
        return None
    if not limit or s.episodes is None:
        return None
    # The asked episodes, plus one cut short in every env when the last one ends.
    return (s.episodes + s.envs) * int(limit) * per_transition


def _threshold() -> int:
    available = available_bytes()
    return SPOOL_ABOVE if available is None else min(SPOOL_ABOVE, available // 4)


class SpooledFile:
    """A file output written through a spool folder (``spool_folder``), merged at the end.

    The spool is a folder of npz shards, storing next observations as the file will; its
    compression is the file's alone, given at the merge.

    Args:
        rows: The staging memory and the run's episode tracker.
        plan: The file's write (``target``: the file).
        spool: The spool folder.
        settings: The run's settings.
        metadata: The run's metadata (the file's).
    """

    def __init__(
        self,
        rows: RunRows,
        plan: WritePlan,
        spool: Path,
        settings: CollectSettings,
        metadata: MetadataProvider,
    ) -> None:
        self.plan = plan
        self.spool = spool
        self.output = plan.target
        self.settings = settings
        shards = WritePlan(spool, SHARDED_FOLDER, frames=plan.frames)
        self.folder = FolderOutput(rows, shards, settings, metadata, spooled=True)
        self.sink = self.folder.sink
        self.before = self.folder.before

    def merge(
        self, stats: CollectStats | None, progress: Callable[[str, float], None] | None = None
    ) -> SavedFile | None:
        """Flush the staging area, convert the spool folder to the output file by slices of rows.

        ``stats``: the run's counts; ``progress`` gets the fraction written; then the
        folder is removed.

        Raises:
            OutputError: The file could not be written; the rows are kept in the folder its
                ``saved_to`` names (``expcli convert FOLDER FILE`` writes the file later).
        """
        from expcli.conversion import convert_planned
        from expcli.formats.checked_write import remove

        spool, output, plan = self.spool, self.output, self.plan
        try:
            folded = self.folder.finish(stats)
        except BaseException as error:
            _stopped(error, spool, output, self._rows_in())
            raise
        if folded is None:
            remove(spool)
            return None
        try:
            convert_planned(spool, plan, progress=progress)
        except BaseException as error:
            _stopped(error, spool, output, folded.transitions)
            raise
        remove(spool)
        size = output.stat().st_size
        return SavedFile(output, size, folded.transitions, folded.episodes)

    def keep(self, error: BaseException) -> BaseException:
        """Keep the spool's shards, without a merge: the run stopped while collecting.

        It stopped because a shard could not be written, or at a second Ctrl-C.

        Returns:
            What to raise: an ``OutputError`` (or ``MergeInterrupted`` for a
            ``KeyboardInterrupt``) saying where the rows are kept; ``error`` itself when
            there are none.
        """
        self.sink.close()
        try:
            _stopped(error, self.spool, self.output, self._rows_in())
        except (OutputError, MergeInterrupted) as kept:
            return kept
        return error

    def _rows_in(self) -> int:
        """Transitions in the spool's shards (0 when they cannot be told)."""
        try:
            return int(self.sink.writer.manifest.rows) * self.settings.envs
        except Exception:
            return 0


def _stopped(error: BaseException, spool: Path, output: Path, rows: int) -> None:
    """A merge stopped by ``error``: keep the rows the spool holds (none: remove it).

    Raises what says where they are: an ``OutputError``, or ``MergeInterrupted``.
    """
    from expcli.formats.checked_write import remove

    if rows == 0:
        remove(spool)  # nothing collected reached a shard: nothing to keep
        return
    kept = _keep(spool, output)
    if kept is None:
        where = "the collected rows could not be kept"
    else:
        where = f"the {rows:,} transitions collected are kept in the sharded folder {kept} "
        if kept == spool:  # it could not be renamed (a read-only folder)
            where += f"(move it elsewhere: the next write of {output.name} removes it)"
        else:
            where += f"(`expcli convert {kept} {output.name}` writes the file)"
    if isinstance(error, KeyboardInterrupt):
        raise MergeInterrupted(where, kept) from error
    if isinstance(error, Exception):
        from expcli.collect.rescue import with_note

        if not isinstance(error, OutputError):
            error = OutputError(f"writing failed: {error}", path=output)
        elif Path(error.path or output).is_relative_to(spool):  # a shard: name the disk
            error = OutputError(
                error.message,
                path=output.parent,
                errno=error.errno,
                needed=error.needed,
                free=error.free,
            )
        raise with_note(error, where, kept) from error


def _keep(spool: Path, output: Path) -> Path | None:
    """Give the spool folder a name of its own (a stale temporary one would be cleaned).

    Where it cannot be renamed, the spool itself; None when it is gone.
    """
    from expcli.collect.rescue import unused_name

    kept = unused_name(output.parent, output, suffix="")
    try:
        os.replace(spool, kept)
    except OSError:
        return spool if spool.is_dir() else None
    return kept
