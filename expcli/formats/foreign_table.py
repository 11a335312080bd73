"""A Parquet table that expcli did not write (or whose expcli footer its rows disagree with).

Read from its columns alone (``_table_roles`` names the conventions recognised), a row
group at a time: the episode, step, env and done columns are read first, a group at a time,
to place the rows (``_table_order``); every tensor is then ``LazyRows`` whose rows are
gathered from the row groups they lie in, a few decoded groups kept, so that ``convert``,
``inspect`` and ``sample`` hold a bounded amount whatever the table's size.

What the table cannot tell is said in one warning line and in the metadata (``table``),
never guessed silently: without next observations, each is the next row's observation in
its episode, the last of each episode unknown (its own observation repeated, as the LeRobot
reader does); a ``done`` without the terminated/truncated split is taken as terminated,
or as the caller's ``ColumnRoles`` says (``--done-means``), recorded as ``done_means``;
without rewards there is no rewards tensor. A next observation that is null (expcli stores
one once where it is the next row's observation) is the next row's observation of its env.
The parquet format's reader hands such a table here (``parquet_format.open_lazy``), and the
Arrow IPC format's reader every one it opens (``ipc_format.open_lazy``).

A column that a ``--columns`` mapping names and that cannot be what it is given for (of
another type, ragged, null) is the caller's mistake: a ``ConfigError`` (exit 2), not the
file's ``FormatError``.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ConfigError, FormatError
from expcli.formats import _table_order
from expcli.formats._table_columns import ColumnKind, arrow_numbers, first_shape, kind_of
from expcli.formats._table_episodes import episode_rows
from expcli.formats._table_features import declared_types
from expcli.formats._table_groups import RowGroups
from expcli.formats._table_images import check_group_images, lossy_note
from expcli.formats._table_order import Placement, place
from expcli.formats._table_roles import BOOKKEEPING_ROLES, FLAG_ROLES, Roles, roles_of
from expcli.formats.column_roles import ColumnRoles, DoneMeans
from expcli.formats.dataset import Dataset
from expcli.formats.layout_keys import SEAMS_KEY
from expcli.formats.lazy import LazyRows
from expcli.spec import CircularState, TensorSpec

__all__ = ["MAX_TABLE_COLUMNS", "TABLE_KEY", "open_table"]

MAX_TABLE_COLUMNS = 4096
"""The most columns a foreign table may have: each is looked at when it is opened."""

TABLE_KEY = "table"
"""Metadata key: how a foreign table was read (its convention, columns, what is unknown)."""

_FLAG_ROWS = 1 << 20  # cells whose flags one step of ``_placed`` places
_MOST_VALUES = 1 << 28  # values of one row's feature (as the LeRobot reader bounds them)


def open_table(
    parquet: Any,
    path: Path,
    reason: str,
    specs: dict[str, TensorSpec] | None = None,
    mapping: ColumnRoles | None = None,
    reopen: Callable[[], Any] | None = None,
) -> tuple[Dataset, Callable[[], None]]:
    """Open ``parquet`` (a ``ParquetFile``, now owned) from its columns; say so in one warning.

    ``parquet`` may be an Arrow IPC file too (``_ipc_table.IpcTable``: its record batches
    are the row groups).

    ``reason``: why its own metadata is not used ("no expcli metadata", ...). ``specs``:
    the tensors its expcli footer names, where it has one: a column of bytes (frames) is
    read as the tensor of its name when its rows are of that tensor's size. ``mapping``:
    the columns the caller gives roles, and what a lone ``done`` means (``--columns``,
    ``--done-means``). ``reopen``: open another handle on ``parquet``, for a thread that
    decodes ahead of reads in order (None: none does).

    Raises:
        ConfigError: A column ``mapping`` names is not in the table, or cannot be what it
            is given for.
        FormatError: A column of another type than numbers or lists of them, ragged lists,
            nulls, two columns for one role, no observations nor actions, no rows, or rows
            that must be sorted and are too many.
    """
    try:
        return _open_table(parquet, path, reason, specs or {}, mapping, reopen)
    except FormatError as e:
        given = mapping.given.values() if mapping is not None else ()
        if e.key is None or e.key not in given:
            raise
        raise ConfigError(e.message, path=e.path, key=e.key) from e


def _open_table(
    parquet: Any,
    path: Path,
    reason: str,
    specs: dict[str, TensorSpec],
    mapping: ColumnRoles | None,
    reopen: Callable[[], Any] | None,
) -> tuple[Dataset, Callable[[], None]]:
    schema = parquet.schema_arrow
    if len(schema) > MAX_TABLE_COLUMNS:
        raise FormatError(
            f"has {len(schema):,} columns, more than the {MAX_TABLE_COLUMNS:,} read; select the "
            "columns you need first (with duckdb or polars, say)",
            path=path,
        )
    roles = roles_of(list(schema.names), path, mapping)
    episodes = episode_rows(parquet, roles, path)
    if episodes is not None:  # one row per episode: read as the table of its steps
        parquet, schema, reopen = episodes, episodes.schema_arrow, None
        left = f" ({', '.join(episodes.left_out)} left out)" if episodes.left_out else ""
        reason = f"{reason}, one row per episode{left}"
        roles = roles_of(list(schema.names), path, mapping)
    declared = declared_types(schema, path)
    kinds: dict[str, ColumnKind] = {}
    not_numbers: list[str] = []
    for column in _used(roles):
        try:
            spec = specs.get(_named(roles, column))
            kinds[column] = kind_of(schema.field(column), path, spec, declared.get(column))
        except FormatError:
            if column not in roles.others or (
                mapping is not None and column in mapping.given.values()
            ):
                raise
            not_numbers.append(f"{column} ({schema.field(column).type})")  # text, dates: no tensor
    if not_numbers:
        others = tuple(n for n in roles.others if n in kinds)
        roles = dataclasses.replace(roles, others=others, not_numbers=tuple(not_numbers))
    for role in BOOKKEEPING_ROLES:
        name = roles.columns.get(role)
        if name is not None and (
            kinds[name].levels or np.dtype(kinds[name].dtype).kind not in "iu"
        ):
            raise FormatError(
                f"is its {role} column but holds {schema.field(name).type}; expected integers",
                path=path,
                key=name,
            )
    groups = RowGroups(parquet, path, reopen)
    if not groups.count:
        raise FormatError("holds no rows; expected at least one", path=path)
    tensors = [n for n in _used(roles) if n not in _bookkeeping(roles)]
    named = {_named(roles, n): n for n in tensors}
    for name in sorted(tensors, key=lambda n: _named(roles, n).startswith("next_")):
        # a next observation may be null (stored once) where its observations are there
        partner = named.get(_named(roles, name).removeprefix("next_"), "")
        nullable = _named(roles, name).startswith("next_") and partner in groups.columns
        alike = groups.columns.get(partner) if nullable and kinds[partner] == kinds[name] else None
        shape = _shape(groups, name, kinds[name], None if alike is None else alike[1])
        groups.columns[name] = (kinds[name], shape, nullable)
    for name in _bookkeeping(roles):
        groups.columns[name] = (kinds[name], (), False)
    lossy = [lossy_note(_batches(groups, n), path, n) for n in tensors if kinds[n].image]
    key_names: dict[str, str] = {
        r: roles.columns[r] for r in ("episode", "step", "env") if r in roles.columns
    }
    flag_names = {r: roles.columns[r] for r in FLAG_ROLES if r in roles.columns}
    flags: dict[str, list[np.ndarray]] = {}

    def keys() -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        flags.clear()  # asked again where the first pass found the envs not cycled
        for first, found, set_ in groups.keys(key_names, flag_names):
            for role, values in set_.items():
                flags.setdefault(role, []).append(values)
            yield first, found

    placement = place(keys, groups.count, lambda: groups.whole_keys(key_names), path)
    placed = {r: _placed(np.concatenate(flags.pop(r)), placement) for r in flag_names}
    done_means = mapping.done_means if mapping is not None else None
    notes = [n for n in lossy if n]
    dataset = _dataset(groups, roles, placement, placed, path, reason, done_means, notes)
    return dataset, groups.close


def _batches(groups: RowGroups, name: str) -> Iterator[Any]:
    """A column's rows, group after group, 64 at a time."""
    yield from groups.batches(name, range(len(groups.starts) - 1), 64)


def _shape(
    groups: RowGroups, name: str, kind: ColumnKind, partner: tuple[int, ...] | None
) -> tuple[int, ...]:
    """A column's feature shape: its lists' lengths, or those of its first row not null.

    ``partner``: the shape of the observations a next-observation column goes with, taken
    when all its rows are null (each stored once as the next row's).

    Raises:
        FormatError: Every row of a column of variable-size lists is null, and it has no
            partner.
    """
    shape = partner
    if None not in kind.levels and not kind.image and (kind.declared is None or kind.binary):
        shape = tuple(int(length or 0) for length in kind.levels)
    for group in range(len(groups.starts) - 1 if shape is None else 0):
        row = int(groups.starts[group])
        for array in groups.batches(name, range(group, group + 1), 64):
            valid = np.flatnonzero(arrow_numbers(array.is_valid())) if array.null_count else [0]
            if len(array) and len(valid):
                at = int(valid[0])
                shape = first_shape(array.slice(at), kind, groups.path, name, row + at)
                break
            row += len(array)
        if shape is not None:
            break
    if shape is None:
        raise FormatError("holds only nulls; expected values", path=groups.path, key=name)
    if math.prod(shape) > _MOST_VALUES:
        raise FormatError(
            f"has lists of shape {list(shape)}: more than {_MOST_VALUES:,} values a row",
            path=groups.path,
            key=name,
        )
    if kind.image:
        check_group_images(int(np.diff(groups.starts).max(initial=0)), shape, groups.path, name)
    return shape


def _used(roles: Roles) -> list[str]:
    return [*roles.columns.values(), *roles.others]


def _bookkeeping(roles: Roles) -> set[str]:
    return {roles.columns[r] for r in (*BOOKKEEPING_ROLES, *FLAG_ROLES) if r in roles.columns}


def _named(roles: Roles, column: str) -> str:
    """The tensor's name of a column: its role's, else its own."""
    return next((r for r, c in roles.columns.items() if c == column), column)


def _dataset(
    groups: RowGroups,
    roles: Roles,
    placement: Placement,
    flags: dict[str, np.ndarray],
    path: Path,
    reason: str,
    done_means: DoneMeans | None,
    notes: list[str],
) -> Dataset:
    rows, envs = placement.shape
    arrays: dict[str, Any] = {}
    for name, (_, shape, _) in groups.columns.items():
        if name not in _bookkeeping(roles):
            arrays[_named(roles, name)] = _lazy(groups, placement, name, shape or (1,))
    terminated, truncated, seams, unknown = _done(flags, roles, placement, done_means)
    unknown[:0] = notes
    ends = terminated | truncated | placement.episode_ends()
    follows = _successors(groups, roles, placement)
    for tensor in [n for n in arrays if n == "observations" or n.startswith("observations/")]:
        following = "next_" + tensor
        if following in arrays:
            stored = arrays[following]
            arrays[following] = _NullsFilled(stored, arrays[tensor], ends, follows)
        else:
            arrays[following] = _Following(arrays[tensor], ends)
            if not any(u.startswith("no next") for u in unknown):
                unknown.append(
                    "no next observations: each is the next row's in its episode, the last of "
                    "each episode unknown (its own observation repeated)"
                )
    if "rewards" not in arrays:
        unknown.append("no rewards: the dataset has no rewards tensor")
    if placement.sorted:
        unknown.append("its rows sorted by episode and step")
    if placement.envs_glued:
        most = _table_order.MAX_ENV_COLUMNS
        unknown.append(
            f"its envs hold different numbers of rows (or are over {most:,}): one env column, "
            "env after env"
        )
    arrays["terminated"] = terminated.reshape(rows, envs, 1)
    arrays["truncated"] = truncated.reshape(rows, envs, 1)
    table: dict[str, Any] = {"read": reason, "convention": roles.convention}
    table["columns"] = dict(roles.columns)
    if roles.given:
        table["given"] = dict(roles.given)
    if roles.left_out:
        table["left_out"] = list(roles.left_out)
        unknown.append(f"{', '.join(roles.left_out)} left out (their roles given to other columns)")
    if roles.not_numbers:
        table["not_numbers"] = list(roles.not_numbers)
        unknown.append(f"columns of no numbers left out: {', '.join(roles.not_numbers)}")
    if "done" in roles.columns and not {"terminated", "truncated"} & roles.columns.keys():
        table["done_means"] = str(done_means or DoneMeans.TERMINATED)
    if unknown:
        table["unknown"] = unknown
    metadata: dict[str, Any] = {"layout": TABLE_KEY, TABLE_KEY: table}
    if seams.any():
        where = np.argwhere(seams)
        if envs == 1:
            metadata[SEAMS_KEY] = where[:, 0].tolist()
        else:
            table[SEAMS_KEY] = where.tolist()
    said = "; ".join([f"{reason}: read from its columns as {roles.described()}", *unknown])
    warnings.warn(f"{path}: {said}", UserWarning, stacklevel=2)
    dataset = Dataset(arrays, CircularState(0, 0, filled=True), metadata)
    dataset.validate(path)
    return dataset


def _done(
    flags: dict[str, np.ndarray], roles: Roles, placement: Placement, done_means: DoneMeans | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """``terminated``, ``truncated`` and the seams among them ``(T, N)``, and what is unknown.

    ``flags``: the flag columns the table has, by role, placed ``(T, N)``.

    A ``done`` beside one of the flags is the other where that one is not set; a ``done``
    alone is taken as ``done_means`` (None: terminated, said with how to choose); an episode
    that the episode column ends without a flag is a seam, marked truncated (said).
    """
    rows, envs = placement.shape
    unknown: list[str] = []
    terminated = flags.get("terminated", np.zeros((rows, envs), bool))
    truncated = flags.get("truncated", np.zeros((rows, envs), bool))
    done = flags.get("done")
    if done is not None and "terminated" in flags and "truncated" not in flags:
        truncated |= done & ~terminated
    elif done is not None and "terminated" not in flags:
        if "truncated" not in flags and done_means is None:
            unknown.append(
                f"{roles.columns['done']!r} does not tell termination from truncation: taken "
                "as terminated (choose with --done-means terminated|truncated)"
            )
        if done_means is DoneMeans.TRUNCATED and "truncated" not in flags:
            truncated |= done
        else:
            terminated |= done & ~truncated
    if not flags and placement.episodes is None:
        unknown.append("no done flags nor episode column: one episode an env column, not ended")
    seams = placement.episode_ends() & ~(terminated | truncated)
    truncated |= seams
    if seams.any():
        unknown.append(
            "no done flags: each episode's end marked truncated"
            if not flags
            else f"{int(seams.sum()):,} episode ends without a done flag: marked truncated"
        )
    return terminated, truncated, seams, unknown


def _placed(values: np.ndarray, placement: Placement) -> np.ndarray:
    """A column read in file order placed ``(T, N)``, ``_FLAG_ROWS`` cells at a time."""
    rows, envs = placement.shape
    begin = placement.contiguous(0, rows)
    if begin is not None:
        return values[begin : begin + rows * envs].reshape(rows, envs)
    out = np.empty((rows, envs), values.dtype)
    step = max(1, _FLAG_ROWS // max(envs, 1))
    for first in range(0, rows, step):
        stop = min(rows, first + step)
        out[first:stop] = values[placement.cells(first, stop)]
    return out


def _cells(
    groups: RowGroups, placement: Placement, name: str, first: int, stop: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """A column's cells of tensor rows ``first..stop``, flat, and which are valid (None: all).

    Read as one run of file rows where they are one (a table in file order).
    """
    begin = placement.contiguous(first, stop)
    if begin is not None:
        return groups.run(name, begin, (stop - first) * placement.shape[1])
    return groups.take(name, placement.cells(first, stop).reshape(-1))


def _successors(
    groups: RowGroups, roles: Roles, placement: Placement
) -> Callable[[int, int], np.ndarray] | None:
    """Whether each cell's next row in its env column followed it when expcli wrote them.

    From expcli's ``row`` and ``env`` columns (None without a ``row`` column): for tensor
    rows ``first..last``, ``(last - first, N)`` bools.
    """
    if "row" not in roles.columns:
        return None
    named = [roles.columns[r] for r in ("row", "env") if r in roles.columns]
    columns = [_lazy(groups, placement, name, (1,)) for name in named]

    def follows(first: int, last: int) -> np.ndarray:
        read = [c.with_valid(first, last + 1)[0].reshape(last + 1 - first, -1) for c in columns]
        same = read[0][1:] == read[0][:-1] + 1
        for column in read[1:]:
            same &= column[1:] == column[:-1]
        return np.asarray(same)

    return follows


def _lazy(groups: RowGroups, placement: Placement, name: str, shape: tuple[int, ...]) -> _Column:
    kind = groups.columns[name][0]
    rows, envs = placement.shape
    return _Column((rows, envs, *shape), np.dtype(kind.dtype), groups, placement, name)


class _Column(LazyRows):
    """A column placed ``(T, N, *shape)``, read when sliced; ``valid`` says where it is null."""

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        groups: RowGroups,
        placement: Placement,
        name: str,
    ) -> None:
        super().__init__(shape, dtype, self._rows)
        self._groups, self._placement, self.name = groups, placement, name
        self.path = groups.path

    def _rows(self, first: int, stop: int) -> np.ndarray:
        return self.with_valid(first, stop)[0]

    def with_valid(self, first: int, stop: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Rows ``first..stop``, and ``(stop - first, N)`` bools: False where a cell is null.

        The bools are None where no cell is null.
        """
        values, valid = _cells(self._groups, self._placement, self.name, first, stop)
        if valid is not None and valid.all():
            valid = None
        return (
            values.reshape(stop - first, *self.shape[1:]),
            None if valid is None else valid.reshape(stop - first, self.shape[1]),
        )


class _Following(LazyRows):
    """Each row's next observation: the next row's in its episode, its own at the episode's end."""

    def __init__(self, observations: LazyRows, ends: np.ndarray) -> None:
        super().__init__(observations.shape, observations.dtype, self._rows)
        self.observations, self._ends = observations, ends

    def _rows(self, first: int, stop: int) -> np.ndarray:
        ahead = np.asarray(self.observations[first : min(len(self), stop + 1)])
        out = np.empty_like(ahead[: stop - first])
        moved = len(ahead) - 1  # rows that have a next row
        out[:moved] = ahead[1:]
        out[moved:] = ahead[moved : stop - first]
        kept = self._ends[first:stop]  # episodes' ends: their own observation
        out[kept] = ahead[: stop - first][kept]
        return out

    def cells_apart(self, observations: Any) -> np.ndarray | None:
        """Flat cells (``t * N + n``, sorted) that may differ from ``observations`` one row on.

        Known without a read: episodes' ends and the last row (None: ``observations`` are
        not those it is taken from). ``frames.kept_cells`` asks, so that frames stored
        once are not decoded twice to compare them.
        """
        if observations is not self.observations:
            return None
        apart = self._ends.copy()
        apart[-1:] = True
        return np.flatnonzero(apart).astype(np.int64)


class _NullsFilled(LazyRows):
    """A next-observation column whose null cells are the observation one row on, same env.

    expcli stores a next observation once, null, where it is its env's next row's
    observation. A null is filled from the next row of its env column only where that row
    is the one that followed it when written (``follows``, from expcli's ``row`` and
    ``env`` columns; without them, within its episode): a row cut away by a filter has
    taken the value with it, and such a null is refused, never filled with another's.
    """

    def __init__(
        self,
        stored: _Column,
        observations: LazyRows,
        ends: np.ndarray,
        follows: Callable[[int, int], np.ndarray] | None,
    ) -> None:
        super().__init__(stored.shape, stored.dtype, self._rows)
        self._stored, self._observations = stored, observations
        self._ends, self._follows = ends, follows

    def _rows(self, first: int, stop: int) -> np.ndarray:
        out, valid = self._stored.with_valid(first, stop)
        if valid is None:
            return out
        null = ~valid
        last = min(stop, len(self) - 1)  # rows with a next row
        kept = last - first
        lost = null.copy()  # the last row's: no row after it
        if self._follows is None:
            lost[:kept] &= self._ends[first:last]
        else:
            lost[:kept] &= ~self._follows(first, last)
        if lost.any():
            row, column = (int(i) for i in np.argwhere(lost)[0])
            raise FormatError(
                f"row {first + row:,} of env column {column} is null, stored once as the next "
                "row's observation, and that row is not in the table; expected a value",
                path=self._stored.path,
                key=self._stored.name,
            )
        ahead = np.asarray(self._observations[first + 1 : last + 1])
        out[:kept][null[:kept]] = ahead[null[:kept]]
        return out
