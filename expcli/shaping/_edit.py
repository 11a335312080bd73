"""The plumbing the verbs share: opening sources, checking a target, writing an edit.

``opening`` opens each source lazily (its stored tensors mapped, its checksum started);
``check_output`` plans an output, checked before anything is read; ``write`` makes the
lineage entry, regroups the chosen episodes and writes them atomically through the format's writer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from expcli.conversion import Progress, reporting_reads
from expcli.errors import ConfigError
from expcli.formats import open_lazy, source_format
from expcli.formats.checked_write import check_target, write_checked
from expcli.formats.column_roles import ColumnRoles
from expcli.formats.dataset import Dataset
from expcli.formats.registry import output_format
from expcli.formats.rows import WritePlan
from expcli.formats.table import suffix_help
from expcli.shaping._mapping import map_in_place
from expcli.shaping.episode_table import EpisodeRecords
from expcli.shaping.lineage import (
    LINEAGE_KEY,
    LineagePaths,
    Source,
    checksum_later,
    lineage_entry,
)
from expcli.shaping.regrouped import Pick, regroup
from expcli.spec import FramesForm

__all__ = ["Edit", "Opened", "ShapeResult", "check_output", "opening", "write"]


@dataclass(frozen=True)
class ShapeResult:
    """What one output of a verb got: episodes and transitions kept, and those dropped."""

    path: Path
    format: str
    episodes: int
    transitions: int
    dropped_episodes: int
    dropped_incomplete: int
    seconds: float
    lineage: dict[str, object] = field(default_factory=dict)


@dataclass
class Opened:
    """A source opened lazily: its dataset, checksum on the way, and how to close it.

    ``dataset`` reads by slices of rows (what a pass in order wants); ``mapped`` is the same
    with the tensors that lie whole in the file mapped (what gathers of scattered cells
    want), whose pages ``release`` lets go of.
    """

    path: Path
    format: str
    dataset: Dataset
    close: Callable[[], None]
    source: Source
    mapped: Dataset | None = None
    release: Callable[[], None] | None = None


def check_output(
    path: str | os.PathLike[str],
    to: str | None,
    compression: str | None,
    shard_format: str | None,
    overwrite: bool,
) -> WritePlan:
    """The plan of writing the output ``path``, checked before anything is read.

    ``to`` names its format where the name does not tell; the format is known and the
    target writable (the registry checks the rest of the plan as it writes).

    Raises:
        ConfigError: The format cannot be told.
        OutputExistsError: It exists and ``overwrite`` is false.
    """
    where = Path(path)
    fmt = output_format(where, to)
    if fmt is None:
        raise ConfigError(
            f"cannot tell the output format from {where.name!r}; name a suffix ({suffix_help()})"
        )
    plan = WritePlan(
        where,
        fmt,
        compression=compression,
        shard_format=shard_format,
        frames=FramesForm.ONCE,
        overwrite=overwrite,
    )
    check_target(plan)
    return plan


@dataclass(frozen=True)
class Edit:
    """What to write: the verb and its arguments, and the episodes chosen from each source.

    ``dropped_incomplete``: the incomplete episodes dropped; ``names``: the tensors kept.
    """

    verb: str
    arguments: Mapping[str, Any]
    opened: Sequence[Opened]
    tables: Sequence[EpisodeRecords]
    chosen: Sequence[np.ndarray]
    dropped_incomplete: int
    names: Sequence[str]


class opening:
    """Open each source lazily (and start its checksum); close them all on the way out.

    ``mapping``: how a table source is read (``--columns``, ``--done-means``).

    Raises:
        ConfigError: A target is one of the sources (it would be replaced while read).
    """

    def __init__(
        self,
        sources: Sequence[str | os.PathLike[str]],
        targets: Sequence[WritePlan] = (),
        mapping: ColumnRoles | None = None,
    ) -> None:
        self.paths = [Path(s) for s in sources]
        self.mapping = mapping
        self.opened: list[Opened] = []
        read = {path.resolve() for path in self.paths}
        for target in targets:
            if target.target.resolve() in read:
                raise ConfigError(f"the output is also a source: {target.target}")

    def __enter__(self) -> list[Opened]:
        try:
            for path in self.paths:
                fmt = source_format(path)
                dataset, close = open_lazy(path, fmt, mapping=self.mapping)
                one = Opened(path, fmt, dataset, close, checksum_later(path, fmt))
                self.opened.append(one)
                dataset.validate(path)
                tensors, one.release, unmap = map_in_place(path, dataset.tensors)
                one.mapped = Dataset(tensors, dataset.state, dataset.metadata)
                one.close = _both(unmap, close)
        except BaseException:
            self.__exit__()
            raise
        return self.opened

    def __exit__(self, *exc: object) -> None:
        for one in self.opened:
            one.source.cancel()
            one.close()
        self.opened.clear()


def write(
    edit: Edit,
    target: WritePlan,
    report: Progress,
    started: float,
    paths: LineagePaths = LineagePaths.RELATIVE,
) -> ShapeResult:
    """Write the chosen episodes to ``target``, atomically, with the edit's lineage.

    ``paths``: how the lineage records the sources' paths (relative to ``target``'s folder).
    """
    tables, chosen = edit.tables, edit.chosen
    kept_episodes = sum(len(p) for p in chosen)
    total_episodes = sum(len(t) for t in tables)
    kept_rows = int(sum(t.length[p].sum() for t, p in zip(tables, chosen, strict=True)))
    entry = lineage_entry(
        edit.verb,
        edit.arguments,
        [one.source.result(target.target, paths) for one in edit.opened],
        [one.dataset.metadata for one in edit.opened],
        kept={"episodes": kept_episodes, "transitions": kept_rows},
        dropped={
            "episodes": total_episodes - kept_episodes,
            "incomplete": edit.dropped_incomplete,
            "transitions": int(sum(t.length.sum() for t in tables)) - kept_rows,
        },
    )
    picks = [
        Pick(_only(one.mapped or one.dataset, edit.names), table, picked, one.release)
        for one, table, picked in zip(edit.opened, tables, chosen, strict=True)
    ]
    out = regroup(picks, _output_metadata(edit.opened[0].dataset.metadata, entry))
    report("write", 0.0)
    out = reporting_reads(out, lambda done: report("write", done))
    write_checked(out, target, None)
    report("write", 1.0)
    return ShapeResult(
        target.target,
        target.format,
        kept_episodes,
        kept_rows,
        total_episodes - kept_episodes,
        edit.dropped_incomplete,
        time.perf_counter() - started,
        entry,
    )


def _both(first: Callable[[], None], then: Callable[[], None]) -> Callable[[], None]:
    def close() -> None:
        try:
            first()
        finally:
            then()

    return close


def _only(dataset: Dataset, names: Sequence[str]) -> Dataset:
    tensors = {name: dataset.tensors[name] for name in names}
    return Dataset(tensors, dataset.state, dataset.metadata)


_DROPPED_KEYS = ("created", "layout", LINEAGE_KEY)


def _output_metadata(source: Mapping[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """The first source's user metadata (less its date and foreign layout), with the lineage."""
    kept = {k: v for k, v in source.items() if k not in _DROPPED_KEYS}
    kept[LINEAGE_KEY] = [entry]
    return kept
