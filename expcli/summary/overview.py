"""``summarize``: what a dataset file holds, in one streaming pass, as a plain dataclass.

The file is opened lazily where its format allows (npz members and expcli HDF5 files are
read a slice of rows at a time, ``.pt`` files are memory-mapped), and its valid transitions
go once, in chronological order, through the tensor statistics, the episode statistics and,
when asked, the structural checks. The ``Summary`` that comes out is what both the rich
tables and the JSON of ``expcli inspect`` render.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError, SchemaError
from expcli.formats.column_roles import ColumnRoles, DoneMeans, column_roles
from expcli.formats.dataset import Dataset
from expcli.formats.frames import StoredOnce, stored_once
from expcli.formats.layouts import Layout
from expcli.formats.parquet_sources import source_size
from expcli.formats.table import MINARI_FOLDER, format_named, layouts_in_order
from expcli.spec import overwritten_columns
from expcli.summary.checks import FAILED, Finding, RowFinder
from expcli.summary.chronology import Chunk, chunks, segments
from expcli.summary.duplicates import duplicate_finding, leakage_finding
from expcli.summary.episodes import (
    Distribution,
    EpisodeAccumulator,
    EpisodeStats,
    chunk_flags,
    episode_cutter,
)
from expcli.summary.fingerprints import FingerprintAccumulator, episode_fingerprints
from expcli.summary.pass_watch import PassWatcher, WatcherFactory
from expcli.summary.static_checks import minari_episode_findings, shard_findings, static_findings
from expcli.summary.stats import TensorAccumulator, TensorStats

__all__ = ["Summary", "summarize"]


@dataclass(frozen=True, slots=True)
class Summary:
    """What ``expcli inspect`` reports about a dataset.

    Attributes:
        path: The file (or Minari folder) read.
        format: ``pt``, ``npz``, ``csv`` or ``hdf5``.
        layout: ``expcli``, ``skrl``, ``tianshou``, ``minari`` or ``d4rl``.
        size_bytes: Size on disk (a folder: all its files).
        memory_size: Rows ``T`` of the tensors.
        num_envs: Env columns ``N``.
        transitions: Valid transitions, which every statistic covers.
        wrapped: Whether the circular buffer wrapped (rows of some column were
            overwritten: ``spec.overwritten_columns``).
        metadata: The dataset's metadata (env id, spaces, collector, layout sections).
        tensors: Statistics of each tensor, in name order.
        episodes: Episode statistics; None without ``terminated``/``truncated`` or when
            not asked for.
        unwritten: Transitions of a skrl export that were never written (NaN-filled), which
            the reader left out.
        head: The first transitions in chronological order: ``row``, ``env`` and each
            tensor's values as lists.
        checks: Outcomes of the structural checks; None when they were not run.
        error: Why the data could not be read (only with checks, which report it).
        leftovers: Temporary files in a dataset folder, left by a write that was killed
            (removed by the next ``collect --resume``).
        frames: The next-observation tensors stored once, each with its cells kept and
            bytes saved (``formats.frames.stored_once``); empty when every cell is stored.
    """

    path: str
    format: str
    layout: str
    size_bytes: int
    memory_size: int
    num_envs: int
    transitions: int
    wrapped: bool
    metadata: dict[str, Any]
    tensors: tuple[TensorStats, ...]
    episodes: EpisodeStats | None
    unwritten: int = 0
    head: tuple[dict[str, Any], ...] = ()
    checks: tuple[Finding, ...] | None = None
    error: str | None = None
    leftovers: int = 0
    frames: dict[str, StoredOnce] = dataclasses.field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """Whether any check failed."""
        return any(finding.failed for finding in self.checks or ())

    def to_json(self, *, per_env: bool = False) -> dict[str, Any]:
        """The object ``inspect --json`` prints: NaN as null, ±inf as ``"inf"``/``"-inf"``."""
        out: dict[str, Any] = {
            "path": self.path,
            "format": self.format,
            "layout": self.layout,
            "size_bytes": self.size_bytes,
            "memory_size": self.memory_size,
            "num_envs": self.num_envs,
            "transitions": self.transitions,
            "wrapped": self.wrapped,
            "unwritten": self.unwritten,
            "metadata": self.metadata,
            "tensors": [t.to_json() for t in self.tensors],
            "episodes": None if self.episodes is None else self.episodes.to_json(per_env=per_env),
        }
        if self.leftovers:
            out["leftover_temporary_files"] = self.leftovers
        if self.frames:
            out["frames"] = {name: form.to_json() for name, form in self.frames.items()}
        if self.head:
            out["head"] = list(self.head)
        if self.checks is not None:
            out["checks"] = [finding.to_json() for finding in self.checks]
        if self.error is not None:
            out["error"] = self.error
        safe: dict[str, Any] = json_safe(out)
        return safe


def summarize(
    path: str | os.PathLike[str],
    *,
    episodes: bool = True,
    head: int = 0,
    check: bool = False,
    against: Sequence[str | os.PathLike[str]] = (),
    num_envs: int | None = None,
    progress: Callable[[float], None] | None = None,
    episode_records: bool = False,
    watch: WatcherFactory | None = None,
    columns: ColumnRoles | Mapping[str, str] | str | None = None,
    done_means: DoneMeans | str | None = None,
) -> Summary:
    """Summarize a dataset file (any format and layout expcli reads) or a Minari folder.

    Args:
        path: The dataset.
        episodes: Compute episode statistics.
        head: How many of the first transitions to include, in chronological order.
        check: Run the structural checks. A file whose metadata disagrees with its data
            (which the readers refuse) is then reported as a failed check, not raised.
        against: Other datasets (validation or test splits), each compared with this one
            for shared episodes (the ``leakage`` check); implies ``check``.
        num_envs: Env columns of a file that does not record them (a CSV without sidecar,
            a D4RL file); see ``expcli.load``. Also for the files ``against``.
        progress: Called with the fraction done so far: of transitions processed, or with
            ``check`` on a sharded folder, half for the shards' CRC-32 and half for the pass;
            with ``against``, each file takes its share of the bytes.
        episode_records: Keep each complete episode's return, length and place
            (``EpisodeStats.records``), for a caller that picks episodes to show.
        watch: Makes a watcher of the opened dataset that sees every chunk of the pass
            and its episode pieces (``pass_watch.PassWatcher``).
        columns: For a table, the column of each role; see ``expcli.load``. Also for the
            files ``against``.
        done_means: What a table's ``done`` without the split stands for; see
            ``expcli.load``.

    Raises:
        FormatError: No such file, or an unknown, corrupt, truncated or unsafe one (a file
            ``against`` too).
        SchemaError: The tensors disagree with each other or the metadata (without check;
            of a file ``against``, always).
        OSError: The file cannot be read.
    """
    from expcli.formats import SHARDED_FOLDER, open_lazy, source_format

    source = Path(path)
    mapping = column_roles(columns, done_means)
    found = source_format(source)
    others = [Path(other) for other in against]
    for other in others:  # a missing or unknown one before the long pass
        source_format(other)
    check = check or bool(others)
    shares, whole = _shares([source, *others]), progress
    if progress is not None and others:  # each file its share of the bar, by size
        progress = _scaled(progress, 0, shares[0])
    folder = next((r for r in layouts_in_order() if r.reads_folders and r.name == found), None)
    storage = folder.storage if folder is not None else None
    if found == MINARI_FOLDER:  # hdf5, parquet or arrow
        from expcli.formats.layouts.minari.layout import folder_storage

        storage = folder_storage(source) or storage
    fmt = storage or found  # a Minari folder's: the format of its files
    minari = minari_episode_findings(source) if check and _carries(fmt, Layout.MINARI) else None
    shards = None
    if check and found == SHARDED_FOLDER:  # CRC-32 of every shard, then the pass: half the bar each
        shards = shard_findings(source, None if progress is None else _scaled(progress, 0, 0.5))
        progress = None if progress is None else _scaled(progress, 0.5, 0.5)
    damaged = shards is not None and shards.failed  # then reading may fail: say which shard
    try:
        dataset, close = open_lazy(source, found, num_envs=num_envs, mapping=mapping)
    except (SchemaError, FormatError) as e:
        if not check or (isinstance(e, FormatError) and not damaged):
            raise
        if minari is not None and minari.failed:  # what the reader stumbled on, in full
            return _unreadable(source, fmt, [minari], "minari", e)
        if shards is not None and damaged:
            return _unreadable(source, fmt, [shards], "expcli", e)
        finding = Finding("metadata", FAILED, f"the data cannot be read: {e}", 1)
        return _unreadable(source, fmt, [finding], "unknown", e)
    try:
        with np.errstate(invalid="ignore", over="ignore"):  # NaN and inf are counted instead
            summary, fingerprints = _summarize(
                dataset,
                source,
                fmt,
                _Wanted(episodes, episode_records, head, check),
                progress,
                None if watch is None else watch(dataset),
            )
    except FormatError as e:
        if shards is None or not damaged:
            raise
        return _unreadable(source, fmt, [shards], "expcli", e)
    finally:
        close()
    if minari is not None and summary.checks is not None:
        summary = dataclasses.replace(summary, checks=(*summary.checks, minari))
    if shards is not None and summary.checks is not None:
        summary = dataclasses.replace(summary, checks=(*summary.checks, shards))
    if found == SHARDED_FOLDER:
        from expcli.formats.checked_write import leftover_temps

        summary = dataclasses.replace(summary, leftovers=len(leftover_temps(source)))
    if others and fingerprints is not None and summary.checks is not None:
        leaks = _leakage(fingerprints, others, (num_envs, mapping), whole, shares)
        summary = dataclasses.replace(summary, checks=(*summary.checks, *leaks))
    return summary


def _leakage(
    fingerprints: np.ndarray,
    others: list[Path],
    read: tuple[int | None, ColumnRoles | None],
    progress: Callable[[float], None] | None,
    shares: list[float],
) -> list[Finding]:
    """The ``leakage`` finding against each of ``others``; ``shares`` of the bar, FILE's first.

    ``read``: how the others are read: ``num_envs`` and the column mapping.
    """
    out, done = [], shares[0]
    for other, share in zip(others, shares[1:], strict=True):
        step = None if progress is None else _scaled(progress, done, share)
        theirs = episode_fingerprints(other, num_envs=read[0], mapping=read[1], progress=step)
        out.append(leakage_finding(fingerprints, theirs, str(other)))
        done += share
    return out


def _shares(paths: list[Path]) -> list[float]:
    """Each dataset's share of the bytes of them all (equal shares when they hold none)."""
    if len(paths) == 1:
        return [1.0]
    sizes = [_size(path) for path in paths]
    total = sum(sizes)
    return [size / total if total else 1 / len(paths) for size in sizes]


def _carries(fmt: str, layout: Layout) -> bool:
    """Whether files of the format ``fmt`` may hold ``layout``."""
    row = format_named(fmt)
    return row is not None and layout in row.layouts


def _scaled(
    progress: Callable[[float], None], start: float, width: float
) -> Callable[[float], None]:
    """``progress`` of one phase, mapped onto ``[start, start + width]`` of the whole."""
    return lambda done: progress(start + width * done)


def _unreadable(
    source: Path, fmt: str, findings: list[Finding], layout: str, error: Exception
) -> Summary:
    """The summary of a dataset that cannot be read: only ``findings``."""
    return Summary(
        path=str(source),
        format=fmt,
        layout=layout,
        size_bytes=_size(source),
        memory_size=0,
        num_envs=0,
        transitions=0,
        wrapped=False,
        metadata={},
        tensors=(),
        episodes=None,
        checks=tuple(findings),
        error=str(error),
    )


@dataclass(frozen=True, slots=True)
class _Wanted:
    """What a pass computes besides the tensor statistics (``summarize``'s arguments)."""

    episodes: bool
    records: bool
    head: int
    check: bool


def _summarize(
    dataset: Dataset,
    source: Path,
    fmt: str,
    wanted: _Wanted,
    progress: Callable[[float], None] | None,
    watcher: PassWatcher | None,
) -> tuple[Summary, np.ndarray | None]:
    """The summary, and with ``check`` every episode's fingerprint (``fingerprints``)."""
    head, check = wanted.head, wanted.check
    tensors, metadata = dataset.tensors, dataset.metadata
    size, envs = dataset.memory_size, dataset.num_envs
    layout = metadata.get("layout")
    if not isinstance(layout, str):
        layout = "skrl" if not metadata and _carries(fmt, Layout.SKRL) else "expcli"
    state = dataset.state
    section = metadata.get("skrl") if layout == "skrl" else None
    unwritten = section.get("unwritten_transitions") if isinstance(section, dict) else None
    unwritten = unwritten if type(unwritten) is int and unwritten > 0 else 0
    wrapped = bool(overwritten_columns(state, size, envs, metadata).any())
    transitions = state.valid_length(size, envs)
    stats = {
        name: TensorAccumulator(name, array.dtype, tuple(array.shape))
        for name, array in sorted(tensors.items())
    }
    flags = {"terminated", "truncated"} & tensors.keys()
    specs = {name: (np.dtype(a.dtype), tuple(a.shape[2:])) for name, a in tensors.items()}
    cutter = episode_cutter(metadata, state, size, envs)  # one cut for both
    episodes = (
        EpisodeAccumulator(cutter, records=wanted.records) if wanted.episodes and flags else None
    )
    fingerprints = FingerprintAccumulator(specs, cutter) if check else None
    finder = RowFinder(specs, metadata, envs, size) if check else None
    first: list[dict[str, Any]] = []
    seen = 0
    for chunk in chunks(tensors, sorted(tensors), segments(state, size, envs)):
        bad = {name for name, acc in stats.items() if acc.update(chunk.arrays[name])}
        term, trunc = chunk_flags(chunk)
        if episodes is not None or fingerprints is not None or watcher is not None:
            pieces = cutter.cut(chunk.start, chunk.columns, term | trunc)
            if pieces is not None and episodes is not None:
                episodes.update(pieces, _rewards(chunk), term)
            if pieces is not None and fingerprints is not None:
                fingerprints.update(chunk, pieces)
            if watcher is not None:
                watcher.update(chunk, pieces)
        if finder is not None:
            finder.update(chunk, term | trunc, bad)
        if len(first) < head:
            first.extend(_head(chunk, head - len(first)))
        seen += (chunk.stop - chunk.start) * (chunk.last - chunk.first)
        if progress is not None and transitions:
            progress(seen / transitions)
    episode_stats = None
    if episodes is not None:
        episode_stats = episodes.result()
        if episode_stats.records is not None:
            ordered = episode_stats.records.in_time_order(state, size)
            episode_stats = dataclasses.replace(episode_stats, records=ordered)
        if "rewards" not in tensors:
            episode_stats = _without_returns(episode_stats)
    checks, records = None, None
    if finder is not None and fingerprints is not None:
        found = None if episode_stats is None else episode_stats.complete + episode_stats.incomplete
        records = fingerprints.result()
        checks = (
            *finder.findings(unwritten=unwritten),
            duplicate_finding(records),
            *static_findings(metadata, specs, size, found),
        )
    summary = Summary(
        path=str(source),
        format=fmt,
        layout=layout,
        size_bytes=_size(source),
        memory_size=size,
        num_envs=envs,
        transitions=transitions,
        wrapped=wrapped,
        metadata=metadata,
        tensors=tuple(acc.result() for acc in stats.values()),
        episodes=episode_stats,
        unwritten=unwritten,
        head=tuple(first),
        checks=checks,
        frames=stored_once(tensors),
    )
    return summary, records


def json_safe(value: Any) -> Any:
    """``value`` with NaN as None and ±inf as ``"inf"``/``"-inf"``, so that it is valid JSON."""
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _rewards(chunk: Chunk) -> np.ndarray:
    rows, columns = chunk.stop - chunk.start, chunk.last - chunk.first
    array = chunk.arrays.get("rewards")
    if array is None:
        return np.zeros((rows, columns), dtype=np.float64)
    flat = array.reshape(rows, columns, -1)
    if flat.shape[2] == 1:
        return np.asarray(flat[:, :, 0], dtype=np.float64)
    return np.asarray(flat.sum(axis=2, dtype=np.float64))


def _head(chunk: Chunk, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` transitions of a chunk, row by row and env by env."""
    out: list[dict[str, Any]] = []
    for i in range(chunk.stop - chunk.start):
        for j in range(chunk.last - chunk.first):
            if len(out) == limit:
                return out
            entry: dict[str, Any] = {"row": chunk.start + i, "env": chunk.first + j}
            for name, array in chunk.arrays.items():
                entry[name] = array[i, j].tolist()
            out.append(entry)
    return out


def _without_returns(stats: EpisodeStats) -> EpisodeStats:
    """Episode statistics of a dataset without rewards: no returns to speak of."""
    nothing = Distribution.of(np.zeros(0))
    per_env = tuple(dataclasses.replace(env, return_mean=math.nan) for env in stats.per_env)
    return dataclasses.replace(stats, returns=nothing, histogram=((), ()), per_env=per_env)


def _size(source: Path) -> int:
    found = source_size(source)  # a glob's files
    if found is not None:
        return found
    if source.is_dir():
        return sum(p.stat().st_size for p in source.rglob("*") if p.is_file())
    return source.stat().st_size
