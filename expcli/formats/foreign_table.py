"""A Parquet table that expcli did not write (or whose expcli footer its rows disagree with).

Read from its columns alone (``_table_roles`` names the conventions recognised), a row
group at a time: the episode, step, env and done columns are read first, a group at a time,
to place the rows (``_table_order``); every tensor is then ``LazyRows`` whose rows are
gathered from the row groups they lie in, a few decoded groups kept, so that ``convert``,
``inspect`` and ``sample`` hold a bounded amount whatever the table's size.

What the table cannot tell is said in one warning line and in the metadata (``table``),
never guessed silently: without next observations, each is the next row's observation in
its episode, the last of each episode unknown (its own observation repeated, as the LeRobot
reader does); a ``done`` without the terminated/truncated split is taken as terminated;
without rewards there is no rewards tensor. A next observation that is null (expcli stores
one once where it is the next row's observation) is the next row's observation of its env.
The parquet format's reader hands such a table here (``parquet_format.open_lazy``).
"""

from __future__ import annotations

import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ExpcliError, FormatError
from expcli.formats._error_summary import error_summary
from expcli.formats._table_columns import Kind, decode, first_shape, kind_of
from expcli.formats._table_order import Keys, Placement, place
from expcli.formats._table_roles import BOOKKEEPING_ROLES, FLAG_ROLES, Roles, roles_of
from expcli.formats.dataset import Dataset
from expcli.formats.layout_keys import SEAMS_KEY
from expcli.formats.lazy import LazyRows
from expcli.spec import CircularState

__all__ = ["TABLE_KEY", "open_table"]

TABLE_KEY = "table"
"""Metadata key: how a foreign table was read (its convention, columns, what is unknown)."""

_CACHE_BYTES = 64 << 20  # decoded row groups kept, all columns together (one at least)
_FLAG_ROWS = 1 << 20  # cells whose flags one step of ``_flags`` places


def open_table(parquet: Any, path: Path, reason: str) -> tuple[Dataset, Callable[[], None]]:
    """Open ``parquet`` (a ``ParquetFile``, now owned) from its columns; say so in one warning.

    ``reason``: why its own metadata is not used ("no expcli metadata", ...).

    Raises:
        FormatError: A column of another type than numbers or lists of them, ragged lists,
            nulls, two columns for one role, no observations nor actions, no rows, or rows
            that must be sorted and are too many.
    """
    schema = parquet.schema_arrow
    roles = roles_of(list(schema.names), path)
    kinds = {name: kind_of(schema.field(name), path) for name in _used(roles)}
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
    groups = _Groups(parquet, path)
    if not groups.count:
        raise FormatError("holds no rows; expected at least one", path=path)
    tensors = [n for n in _used(roles) if n not in _bookkeeping(roles)]
    for name in sorted(tensors, key=lambda n: _named(roles, n).startswith("next_")):
        nullable = _named(roles, name).startswith("next_")
        partner = roles.columns.get(_named(roles, name).removeprefix("next_"), "")
        alike = (
            groups.columns.get(partner) if nullable and kinds.get(partner) == kinds[name] else None
        )
        shape = _shape(groups, name, kinds[name], None if alike is None else alike[1])
        groups.columns[name] = (kinds[name], shape, nullable)
    for name in _bookkeeping(roles):
        groups.columns[name] = (kinds[name], (), False)
    key_names: dict[str, str] = {
        r: roles.columns[r] for r in ("episode", "step", "env") if r in roles.columns
    }
    placement = place(
        groups.keys(key_names), groups.count, lambda: groups.whole_keys(key_names), path
    )
    return _dataset(groups, roles, placement, path, reason), groups.close


def _shape(
    groups: _Groups, name: str, kind: Kind, partner: tuple[int, ...] | None
) -> tuple[int, ...]:
    """A column's feature shape: its lists' lengths, or those of its first row not null.

    ``partner``: the shape of the observations a next-observation column goes with, taken
    when all its rows are null (each stored once as the next row's).

    Raises:
        FormatError: Every row of a column of variable-size lists is null, and it has no
            partner.
    """
    if None not in kind.levels:
        return tuple(int(length or 0) for length in kind.levels)
    for group in range(len(groups.starts) - 1):
        array = groups.arrow(name, group)
        if array.null_count:
            array = array.filter(array.is_valid())
        if len(array):
            return first_shape(array, kind, groups.path, name)
    if partner is not None:
        return partner
    raise FormatError("holds only nulls; expected values", path=groups.path, key=name)


def _used(roles: Roles) -> list[str]:
    return [*roles.columns.values(), *roles.others]


def _bookkeeping(roles: Roles) -> set[str]:
    return {roles.columns[r] for r in (*BOOKKEEPING_ROLES, *FLAG_ROLES) if r in roles.columns}


def _named(roles: Roles, column: str) -> str:
    """The tensor's name of a column: its role's, else its own."""
    return next((r for r, c in roles.columns.items() if c == column), column)


def _dataset(
    groups: _Groups, roles: Roles, placement: Placement, path: Path, reason: str
) -> Dataset:
    rows, envs = placement.shape
    arrays: dict[str, Any] = {}
    for name, (_, shape, _) in groups.columns.items():
        if name not in _bookkeeping(roles):
            arrays[_named(roles, name)] = _lazy(groups, placement, name, shape or (1,))
    terminated, truncated, seams, unknown = _done(groups, roles, placement)
    ends = terminated | truncated | placement.episode_ends()
    row = roles.columns.get("row")
    rows_column = None if row is None else _lazy(groups, placement, row, (1,))
    for tensor in [n for n in arrays if n == "observations" or n.startswith("observations/")]:
        following = "next_" + tensor
        if following in arrays:
            stored = arrays[following]
            arrays[following] = _NullsFilled(stored, arrays[tensor], ends, rows_column)
        else:
            arrays[following] = _following(arrays[tensor], ends)
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
        unknown.append("its envs hold different numbers of rows: one env column, env after env")
    arrays["terminated"] = terminated.reshape(rows, envs, 1)
    arrays["truncated"] = truncated.reshape(rows, envs, 1)
    table: dict[str, Any] = {"read": reason, "convention": roles.convention}
    table["columns"] = dict(roles.columns)
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
    groups: _Groups, roles: Roles, placement: Placement
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """``terminated``, ``truncated`` and the seams among them ``(T, N)``, and what is unknown.

    A ``done`` without both flags beside it is taken as terminated (said); an episode that
    the episode column ends without a flag is a seam, marked truncated (said).
    """
    rows, envs = placement.shape
    unknown: list[str] = []
    flags = {
        r: _flags(groups, placement, roles.columns[r]) for r in FLAG_ROLES if r in roles.columns
    }
    terminated = flags.get("terminated", np.zeros((rows, envs), bool))
    truncated = flags.get("truncated", np.zeros((rows, envs), bool))
    done = flags.get("done")
    if done is not None and "terminated" in flags and "truncated" not in flags:
        truncated |= done & ~terminated
    elif done is not None and "terminated" not in flags:
        unknown.append(
            f"{roles.columns['done']!r} does not tell termination from truncation: taken "
            "as terminated"
        )
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


def _flags(groups: _Groups, placement: Placement, name: str) -> np.ndarray:
    """A flag column placed ``(T, N)``, as bools (non-zero is set), ``_FLAG_ROWS`` at a time."""
    rows, envs = placement.shape
    out = np.zeros((rows, envs), bool)
    step = max(1, _FLAG_ROWS // max(envs, 1))
    for first in range(0, rows, step):
        stop = min(rows, first + step)
        values = groups.take(name, placement.cells(first, stop).reshape(-1))[0]
        with np.errstate(invalid="ignore"):
            out[first:stop] = values.reshape(stop - first, envs) != 0
    return out


def _lazy(groups: _Groups, placement: Placement, name: str, shape: tuple[int, ...]) -> _Column:
    kind = groups.columns[name][0]
    rows, envs = placement.shape
    return _Column((rows, envs, *shape), np.dtype(kind.dtype), groups, placement, name)


class _Column(LazyRows):
    """A column placed ``(T, N, *shape)``, read when sliced; ``valid`` says where it is null."""

    def __init__(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        groups: _Groups,
        placement: Placement,
        name: str,
    ) -> None:
        super().__init__(shape, dtype, self._rows)
        self._groups, self._placement, self.name = groups, placement, name
        self.path = groups.path

    def _rows(self, first: int, stop: int) -> np.ndarray:
        values, _ = self._groups.take(self.name, self._placement.cells(first, stop).reshape(-1))
        return values.reshape(stop - first, *self.shape[1:])

    def valid(self, first: int, stop: int) -> np.ndarray | None:
        """``(stop - first, N)`` bools, False where a cell is null (None: the column has none)."""
        cells = self._placement.cells(first, stop)
        valid = self._groups.take(self.name, cells.reshape(-1))[1]
        return None if valid is None or valid.all() else valid.reshape(cells.shape)


def _following(observations: LazyRows, ends: np.ndarray) -> LazyRows:
    """Each row's next observation: the next row's in its episode, its own at the episode's end."""
    rows = len(observations)

    def read(first: int, stop: int) -> np.ndarray:
        ahead = np.asarray(observations[first : min(rows, stop + 1)])
        out = np.array(ahead[: stop - first])
        moved = ~ends[first:stop]
        out[: len(ahead) - 1][moved[: len(ahead) - 1]] = ahead[1:][moved[: len(ahead) - 1]]
        return out

    return LazyRows(observations.shape, observations.dtype, read)


class _NullsFilled(LazyRows):
    """A next-observation column whose null cells are the observation one row on, same env.

    expcli stores a next observation once, null, where it is its env's next row's
    observation. A null that ends an episode is the next row's only where that row is
    the one that followed it when written (expcli's ``row`` column says so): an episode
    cut by a filter has lost it, and such a null is refused, never filled with another's.
    """

    def __init__(
        self,
        stored: _Column,
        observations: LazyRows,
        ends: np.ndarray,
        rows: _Column | None,
    ) -> None:
        super().__init__(stored.shape, stored.dtype, self._rows)
        self._stored, self._observations, self._ends, self._row = stored, observations, ends, rows

    def _rows(self, first: int, stop: int) -> np.ndarray:
        out = np.array(self._stored[first:stop])
        valid = self._stored.valid(first, stop)
        if valid is None:
            return out
        null = ~valid
        last = min(stop, len(self) - 1)  # rows with a next row
        lost = null & self._ends[first:stop]
        lost[last - first :] = null[last - first :]
        if lost[: last - first].any() and self._row is not None:
            here = np.asarray(self._row[first:last]).reshape(last - first, -1)
            after = np.asarray(self._row[first + 1 : last + 1]).reshape(last - first, -1)
            lost[: last - first] &= after != here + 1
        if lost.any():
            row, column = (int(i) for i in np.argwhere(lost)[0])
            raise FormatError(
                f"row {first + row:,} of env column {column} is null, stored once as the next "
                "row's observation, and that row is not in the table; expected a value",
                path=self._stored.path,
                key=self._stored.name,
            )
        ahead = np.asarray(self._observations[first + 1 : last + 1])
        out[: last - first][null[: last - first]] = ahead[null[: last - first]]
        return out


class _Groups:
    """The table's row groups, a few decoded ones kept (about ``_CACHE_BYTES``).

    Attributes:
        columns: Each column read: its kind, feature shape (``()`` a scalar) and whether
            it may hold nulls.
        count: The table's rows.
    """

    def __init__(self, parquet: Any, path: Path) -> None:
        self.parquet, self.path = parquet, path
        meta = parquet.metadata
        counts = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        self.starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
        self.count = int(self.starts[-1])
        self.columns: dict[str, tuple[Kind, tuple[int, ...], bool]] = {}
        self._kept: OrderedDict[tuple[str, int], tuple[np.ndarray, np.ndarray | None]] = (
            OrderedDict()
        )
        self._bytes = 0
        self._lock = threading.Lock()  # readers ahead share the file and the kept groups

    def arrow(self, name: str, group: int) -> Any:
        """Group ``group`` of column ``name`` as one Arrow array."""
        try:
            table = self.parquet.read_row_group(group, columns=[name], use_threads=False)
            return table.column(0).combine_chunks()
        except Exception as e:
            if isinstance(e, ExpcliError):
                raise
            raise FormatError(
                f"row group {group} cannot be read ({error_summary(e)}); the file is damaged",
                path=self.path,
                key=name,
            ) from e

    def decoded(self, name: str, group: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Group ``group`` of column ``name`` decoded (and its valid rows, where nullable)."""
        found = self._kept.get((name, group))
        if found is not None:
            self._kept.move_to_end((name, group))
            return found
        kind, shape, nullable = self.columns[name]
        where = (self.path, name, int(self.starts[group]))
        values = decode(self.arrow(name, group), kind, shape, where, nullable)
        self._kept[name, group] = values
        self._bytes += values[0].nbytes
        while self._bytes > _CACHE_BYTES and len(self._kept) > 1:
            dropped, _ = self._kept.popitem(last=False)[1]
            self._bytes -= dropped.nbytes
        return values

    def take(self, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Values of file rows ``rows`` of a column, and where nullable, whether each is valid."""
        kind, shape, nullable = self.columns[name]
        out = np.empty((len(rows), *shape), kind.dtype)
        valid = np.ones(len(rows), bool) if nullable else None
        group_of = np.searchsorted(self.starts, rows, side="right") - 1
        order = np.argsort(group_of, kind="stable")
        edges = np.flatnonzero(np.diff(group_of[order])) + 1
        with self._lock:
            for at in np.split(order, edges) if len(order) else []:
                group = int(group_of[at[0]])
                values, mask = self.decoded(name, group)
                local = rows[at] - self.starts[group]
                out[at] = values[local]
                if valid is not None and mask is not None:
                    valid[at] = mask[local]
        return out, valid

    def keys(self, names: dict[str, str]) -> Iterator[tuple[int, Keys]]:
        """Each row group's first row and its ``names`` (role -> column) as int64 arrays."""
        for group in range(len(self.starts) - 1):
            yield int(self.starts[group]), self._keys(names, group)

    def whole_keys(self, names: dict[str, str]) -> Keys:
        """The ``names`` columns of every row, as int64 arrays."""
        parts = [self._keys(names, g) for g in range(len(self.starts) - 1)]
        return {role: np.concatenate([p[role] for p in parts]) for role in names}

    def _keys(self, names: dict[str, str], group: int) -> Keys:
        out = {}
        for role, name in names.items():
            kind = self.columns[name][0]
            where = (self.path, name, int(self.starts[group]))
            values, _ = decode(self.arrow(name, group), kind, (), where, False)
            out[role] = values.astype(np.int64)
        return out

    def close(self) -> None:
        """Drop the decoded groups and close the file."""
        with self._lock:
            self._kept.clear()
            self._bytes = 0
            self.parquet.close()
