"""merge, split and filter: new datasets made of whole episodes of others, streamed.

Each verb finds the episodes of its sources in one pass over their small tensors
(``episode_table``), chooses, and writes the chosen episodes one after the other in one env
column (``regrouped``) through the format table's writers: atomically, a slice of rows at a
time, so memory holds the table and a few slices whatever the size of the data. The output's
metadata records where it came from (``lineage``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from expcli.conversion import Progress
from expcli.errors import ConfigError, SchemaError, quoted
from expcli.formats.column_roles import ColumnRoles, DoneMeans, column_roles
from expcli.formats.dataset import Dataset
from expcli.shaping._edit import Edit, Opened, ShapeResult, check_output, opening, write
from expcli.shaping.episode_table import EpisodeRecords, info_fields, scan_episodes
from expcli.shaping.lineage import LineagePaths, shown_path
from expcli.shaping.sameness import Allowance, first_difference

__all__ = ["Incomplete", "ShapeResult", "filter_episodes", "merge", "split"]

FLAGS = ("terminated", "truncated")


class Incomplete(StrEnum):
    """What becomes of episodes whose start or end the data does not hold."""

    DROP = "drop"
    KEEP = "keep"


# ----------------------------------------------------------------------------- verbs


def filter_episodes(
    source: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    where: str | None = None,
    top: str | None = None,
    by: str = "return",
    episodes: str | None = None,
    envs: str | None = None,
    keep: Sequence[str] | None = None,
    drop: Sequence[str] | None = None,
    incomplete: str | Incomplete = Incomplete.DROP,
    to: str | None = None,
    compression: str | None = None,
    shard_format: str | None = None,
    overwrite: bool = True,
    progress: Progress | None = None,
    lineage_paths: LineagePaths | str = LineagePaths.RELATIVE,
    columns: ColumnRoles | Mapping[str, str] | str | None = None,
    done_means: DoneMeans | str | None = None,
) -> ShapeResult:
    """Write the episodes of ``source`` that the selectors pick (all given, combined) to ``target``.

    Args:
        source: The dataset to read (any format or folder expcli reads).
        target: The dataset to write; its suffix (or ``to``) names the format, no suffix a
            sharded folder (``shard_format``: npz or parquet).
        where: An expression over episode fields (``return``, ``length``, ``terminated``,
            ``truncated``, ``env``, ``index``, ``complete``, ``infos/<name>`` means), e.g.
            ``"return >= 200 and length < 400"``; parsed, never run as Python.
        top: ``"10%"`` or ``"10"``: the best episodes by ``by`` among those the other
            selectors keep (highest first; ties: the earlier episode).
        by: The field ``top`` ranks by.
        episodes: Episode indexes: ``"0:100"``, ``"-10:"``, ``"3,7,9"``.
        envs: Env columns: ``"0,3"``, ``"0-3"``.
        keep: Tensors to keep (a name keeps its leaves: ``observations`` keeps
            ``observations/pos``); the done flags stay.
        drop: Tensors to leave out (never the done flags).
        incomplete: Episodes cut short (the first of a wrapped column, the last open one of
            every column): dropped (counted), or kept and marked as cut.
        to: The output format, when ``target``'s name does not tell.
        compression: The output's compression, for a format that compresses.
        shard_format: A folder output's shard format.
        overwrite: Replace an existing ``target`` (atomically).
        progress: Called with a phase ("read", "write") and the fraction done.
        lineage_paths: How the output's lineage records the source's path: relative to the
            output's folder (the default), or absolute.
        columns: For a table source, the column of each role; see ``expcli.load``.
        done_means: What a table's ``done`` without the split stands for; see
            ``expcli.load``.

    Raises:
        ConfigError: A bad selector or option (exit 2); nothing is written.
        SchemaError: A tensor named in ``keep``/``drop`` is not in the source.
    """
    from expcli.shaping.selectors import select
    from expcli.shaping.where import parse_where

    started = time.perf_counter()
    mode = _incomplete(incomplete)
    report = progress or _silent
    output = check_output(target, to, compression, shard_format, overwrite)
    with opening([source], [output], column_roles(columns, done_means)) as [opened]:
        names = _tensors_kept(opened, keep, drop)
        expression = parse_where(where, _field_names(opened.dataset)) if where else None
        infos = {n for n in (expression.fields if expression else ()) if n.startswith("infos/")}
        if by.startswith("infos/"):
            infos.add(by)
        report("read", 0.0)
        table = scan_episodes(opened.dataset, sorted(infos))
        report("read", 1.0)
        mask = select(
            table.fields(),
            where=expression,
            top=top,
            by=by,
            episodes=episodes,
            envs=envs,
            among=table.complete if mode is Incomplete.DROP else None,
        )
        chosen, cut = _complete_only(table, mask, mode)
        arguments = _arguments(
            where=where, top=top, by=by if top else None, episodes=episodes, envs=envs,
            keep=list(keep or ()) or None, drop=list(drop or ()) or None, incomplete=mode.value,
        )  # fmt: skip
        edit = Edit("filter", arguments, [opened], [table], [chosen], cut, names)
        return write(edit, output, report, started, LineagePaths.parse(lineage_paths))


def split(
    source: str | os.PathLike[str],
    targets: Sequence[str | os.PathLike[str]],
    *,
    fractions: Sequence[float] | None = None,
    seed: int = 0,
    incomplete: str | None = None,
    to: str | None = None,
    compression: str | None = None,
    shard_format: str | None = None,
    overwrite: bool = True,
    progress: Progress | None = None,
    lineage_paths: LineagePaths | str = LineagePaths.RELATIVE,
    columns: ColumnRoles | Mapping[str, str] | str | None = None,
    done_means: DoneMeans | str | None = None,
) -> list[ShapeResult]:
    """Share the episodes of ``source`` out among ``targets``, whole, at random (seeded).

    Every complete episode goes to exactly one target, never to two; ``fractions``
    (summing to 1, one per target; default equal shares) set the shares, rounded so that
    the counts add up. Incomplete episodes are dropped and counted unless ``incomplete``
    names one of the targets (its file name, or its position ``0``, ``1``...), which then
    gets them, marked as cut. ``lineage_paths``: as ``merge``'s; ``columns``,
    ``done_means``: as ``filter_episodes``'.

    Raises:
        ConfigError: Fewer than two targets, fractions that do not fit them, a target
            given twice, or an ``incomplete`` that names no target.
    """
    from expcli.shaping.selectors import split_episodes

    started = time.perf_counter()
    paths = [Path(t) for t in targets]
    if len(paths) < 2:
        raise ConfigError("split needs at least two outputs (-o TRAIN -o VAL ...)")
    if len({p.resolve() for p in paths}) < len(paths):
        raise ConfigError("split got the same output twice")
    shares = list(fractions) if fractions is not None else [1 / len(paths)] * len(paths)
    if len(shares) != len(paths):
        raise ConfigError(f"--fractions gives {len(shares)} shares for {len(paths)} outputs")
    spare = _incomplete_target(incomplete, paths)
    report = progress or _silent
    outputs = [check_output(p, to, compression, shard_format, overwrite) for p in paths]
    results = []
    with opening([source], outputs, column_roles(columns, done_means)) as [opened]:
        report("read", 0.0)
        table = scan_episodes(opened.dataset)
        report("read", 1.0)
        complete = np.flatnonzero(table.complete)
        assigned = split_episodes(len(complete), shares, seed=seed)
        cut = np.flatnonzero(~table.complete)
        names = sorted(opened.dataset.tensors)
        for number, output in enumerate(outputs):
            extra = cut if spare == number else cut[:0]
            chosen = np.sort(np.concatenate([complete[assigned == number], extra]))
            shown = LineagePaths.parse(lineage_paths)
            arguments = _arguments(
                fractions=shares, seed=seed, part=number,
                outputs=[shown_path(p, output.target, shown) for p in paths],
                incomplete=(
                    None if spare is None else shown_path(paths[spare], output.target, shown)
                ),
            )  # fmt: skip
            dropped = 0 if spare is not None else len(cut)
            edit = Edit("split", arguments, [opened], [table], [chosen], dropped, names)
            phase = _phase(report, f"write {number + 1}/{len(paths)}")
            results.append(write(edit, output, phase, started, shown))
    return results


def merge(
    sources: Sequence[str | os.PathLike[str]],
    target: str | os.PathLike[str],
    *,
    allow: Iterable[str | Allowance] = (),
    incomplete: str | Incomplete = Incomplete.KEEP,
    to: str | None = None,
    compression: str | None = None,
    shard_format: str | None = None,
    overwrite: bool = True,
    progress: Progress | None = None,
    lineage_paths: LineagePaths | str = LineagePaths.RELATIVE,
    columns: ColumnRoles | Mapping[str, str] | str | None = None,
    done_means: DoneMeans | str | None = None,
) -> ShapeResult:
    """Write the episodes of every source, source after source, to ``target``.

    The sources must hold the same tensors (names, dtypes, shapes) and spaces; the first
    difference is refused in one line, unless ``allow`` names it as safe (``env-id``,
    ``env-spec``), and then it is recorded in the output's lineage. Each source gives its
    episodes in the order they ended (a wrapped one its valid rows, oldest first).
    Incomplete episodes are kept by default, marked as cut; ``incomplete="drop"`` drops them.
    The output's lineage records each source's path relative to the output's folder
    (``lineage_paths="absolute"``: absolute), its size and SHA-256. ``columns`` and
    ``done_means`` read every table source, as ``filter_episodes``' do.

    Raises:
        ConfigError: Fewer than two sources, or sources that differ in what ``allow`` does
            not cover (exit 2); nothing is written.
    """
    started = time.perf_counter()
    if len(sources) < 2:
        raise ConfigError("merge needs at least two datasets")
    mode = _incomplete(incomplete)
    allowed = {Allowance.parse(a) for a in allow}
    report = progress or _silent
    output = check_output(target, to, compression, shard_format, overwrite)
    with opening(sources, [output], column_roles(columns, done_means)) as opened:
        differences = []
        for other in opened[1:]:
            differences += first_difference(opened[0], other, allowed)
        report("read", 0.0)
        tables, chosen, dropped = [], [], 0
        for number, one in enumerate(opened):
            table = scan_episodes(one.dataset)
            picked, cut = _complete_only(table, np.ones(len(table), dtype=bool), mode)
            tables.append(table)
            chosen.append(picked)
            dropped += cut
            report("read", (number + 1) / len(opened))
        arguments = _arguments(
            allow=sorted(a.value for a in allowed) or None,
            allowed_differences=differences or None,
            incomplete=mode.value,
        )
        names = sorted(opened[0].dataset.tensors)
        edit = Edit("merge", arguments, opened, tables, chosen, dropped, names)
        return write(edit, output, report, started, LineagePaths.parse(lineage_paths))


# ------------------------------------------------------------------------- internals


def _silent(phase: str, done: float) -> None:
    """No progress to report."""


def _incomplete(value: str | Incomplete) -> Incomplete:
    try:
        return Incomplete(value)
    except ValueError:
        raise ConfigError(
            f"--incomplete {quoted(value)}: expected one of "
            f"{', '.join(m.value for m in Incomplete)}"
        ) from None


def _incomplete_target(value: str | None, paths: list[Path]) -> int | None:
    if value is None or value == Incomplete.DROP:
        return None
    for number, path in enumerate(paths):
        if value in (str(path), path.name, str(number)):
            return number
    raise ConfigError(
        f"--incomplete {quoted(value)}: expected 'drop', an output's name or its position "
        "(0, 1, ...)"
    )


def _field_names(dataset: Dataset) -> list[str]:
    base = ["return", "length", "terminated", "truncated", "env", "index", "complete"]
    return [*base, *info_fields(dataset)]


def _tensors_kept(
    opened: Opened, keep: Sequence[str] | None, drop: Sequence[str] | None
) -> list[str]:
    names = sorted(opened.dataset.tensors)

    def matching(given: str) -> list[str]:
        found = [n for n in names if n == given or n.startswith(given.rstrip("/") + "/")]
        if not found:
            raise SchemaError(
                f"no tensor {given!r}; tensors: {', '.join(names)}", path=opened.path, key=given
            )
        return found

    chosen = names
    if keep:
        wanted = {n for given in keep for n in matching(given)}
        chosen = [n for n in names if n in wanted or n in FLAGS]
    if drop:
        gone = {n for given in drop for n in matching(given)}
        flags = sorted(gone & set(FLAGS))
        if flags:
            raise ConfigError(
                f"--drop {flags[0]}: the done flags stay, since episodes are cut by them"
            )
        chosen = [n for n in chosen if n not in gone]
    return chosen


def _complete_only(table: EpisodeRecords, mask: np.ndarray, mode: Incomplete) -> tuple[Any, int]:
    """Indexes of the chosen episodes, and the incomplete ones dropped (all, when dropped)."""
    if mode is Incomplete.KEEP:
        return np.flatnonzero(mask), 0
    return np.flatnonzero(mask & table.complete), int((~table.complete).sum())


def _arguments(**given: Any) -> dict[str, Any]:
    return {k: v for k, v in given.items() if v is not None}


def _phase(report: Progress, name: str) -> Progress:
    return lambda phase, done: report(name if phase == "write" else phase, done)
