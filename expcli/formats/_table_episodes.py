"""A table of one row per episode, shown to the foreign-table reader as one row per step.

Decision-transformer style datasets (on the Hub, and as D4RL's trajectories are often
stored) hold an episode a row: ``observations: list<list<float>>``, ``actions:
list<...>``, ``rewards: list<float>``, ``dones``/``terminals: list<bool>``, each list as
long as the episode. Such a table is recognised by its schema (every column of a role is a
list, and the rewards or a flag column a list of scalars, which no table of one row a step
holds) and the lengths of its first row, and ``EpisodeRows`` shows it as the table of one
row a step that ``foreign_table.open_table`` reads: each list column one level down, and an
``episode_index`` column, the episode's row, so that the one placement of rows by episode
places them. A row group stays a row group (its steps counted once, at open, from one
column's list lengths); every list column's lengths are checked against those, row by row.
Columns that are not lists (an episode's seed, its length) are left out, and said.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ExpcliError, FormatError
from expcli.formats._error_summary import unreadable_group
from expcli.formats._ipc_table import RowCounts
from expcli.formats._table_columns import arrow_numbers
from expcli.formats._table_roles import FLAG_ROLES, TENSOR_ROLES, Roles

__all__ = ["EPISODE_COLUMN", "EpisodeRows", "episode_rows"]

EPISODE_COLUMN = "episode_index"
"""The column of each step's episode (the file row of its episode) that a view adds."""
_EPISODES_A_BATCH = 256


def _is_list(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind))


def episode_rows(table: Any, roles: Roles, path: Path) -> EpisodeRows | None:
    """``table`` (a ``ParquetFile`` or an ``IpcTable``) a row a step, if it holds an episode a row.

    None: it holds one a step.

    Raises:
        FormatError: Its first rows cannot be read.
    """
    schema = table.schema_arrow
    named = [roles.columns[r] for r in (*TENSOR_ROLES, *FLAG_ROLES) if r in roles.columns]
    scalars = [roles.columns[r] for r in ("rewards", *FLAG_ROLES) if r in roles.columns]
    if not scalars or not all(_is_list(schema.field(n).type) for n in named):
        return None
    if any(_is_list(schema.field(n).type.value_type) for n in scalars):
        return None  # rewards of lists: a table of one row a step cannot hold them either
    if roles.columns.keys() & {"episode", "step"}:
        return None  # rows placed by their own episode column: one a step
    # steps counted from a list of scalars (not a whole pass over the observations)
    view = EpisodeRows(table, path, [*scalars, *(n for n in named if n not in scalars)])
    flags_listed = any(r in roles.columns for r in FLAG_ROLES)
    return view if flags_listed or view.first_row_agrees() else None


class EpisodeRows:
    """The steps of a table of one row per episode, as ``ParquetFile``'s members show them.

    Attributes:
        schema_arrow: Each list column one level down, others left out, and
            ``EPISODE_COLUMN``.
        metadata: The steps of each row group, and the table's key-value metadata.
        left_out: The columns that are not lists, left out.
        reads_columns_together: False: ``iter_batches`` reads one column at a time.
    """

    reads_columns_together = False

    def __init__(self, table: Any, path: Path, named: list[str]) -> None:
        import pyarrow as pa

        self.table, self.path = table, path
        schema = table.schema_arrow
        fields = [f for f in schema if _is_list(f.type)]
        self.left_out = tuple(f.name for f in schema if not _is_list(f.type))
        self._lists = [f.name for f in fields]
        self.schema_arrow = pa.schema(
            [pa.field(f.name, f.type.value_type) for f in fields]
            + [pa.field(EPISODE_COLUMN, pa.int64())]
        )
        self._named = named
        meta = table.metadata
        self._firsts: list[int] = []  # each group's first episode (file row)
        self._lengths: list[np.ndarray] = []  # each group's episode lengths
        first = 0
        for group in range(meta.num_row_groups):
            lengths = [
                self._lengths_of(a, named[0], first + at) for at, a in self._rows(named[0], group)
            ]
            self._lengths.append(np.concatenate(lengths) if lengths else np.zeros(0, np.int64))
            self._firsts.append(first)
            first += meta.row_group(group).num_rows
        self.metadata = RowCounts([int(n.sum()) for n in self._lengths], schema.metadata)

    def first_row_agrees(self) -> bool:
        """Whether the first episode's lists are of one length in every column of a role."""
        found = {
            int(self._lengths_of(next(iter(self._rows(n, 0, 1)))[1], n, 0)[0])
            for n in self._named
            if self.metadata.num_row_groups and len(self._lengths[0])
        }
        return len(found) <= 1

    def _rows(
        self, name: str, group: int, episodes: int = _EPISODES_A_BATCH
    ) -> Iterator[tuple[int, Any]]:
        """Group ``group``'s rows of ``name``, ``episodes`` at a time, with their first row."""
        at = 0
        try:
            for batch in self.table.iter_batches(
                batch_size=episodes, row_groups=[group], columns=[name], use_threads=False
            ):
                yield at, batch.column(0)
                at += batch.num_rows
        except Exception as e:
            if isinstance(e, ExpcliError):
                raise
            raise unreadable_group(e, self.path, name, group) from e

    def _lengths_of(self, array: Any, name: str, first: int) -> np.ndarray:
        """The lists' lengths of rows ``first...`` of ``name`` (refusing a null episode)."""
        import pyarrow.compute as pc

        if array.null_count:
            row = first + int(np.argmin(arrow_numbers(array.is_valid())))
            raise FormatError(
                f"row {row:,} (an episode) is null; expected lists", path=self.path, key=name
            )
        return arrow_numbers(pc.list_value_length(array)).astype(np.int64)

    def iter_batches(
        self, batch_size: int, row_groups: list[int], columns: list[str], use_threads: bool = False
    ) -> Iterator[Any]:
        """The steps of ``columns`` (one) of ``row_groups``, about ``batch_size`` at a time.

        Raises:
            FormatError: An episode's lists are not as long in this column as in the first.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        del use_threads
        [name] = columns
        for group in row_groups:
            lengths, first = self._lengths[group], self._firsts[group]
            if name == EPISODE_COLUMN:
                steps = np.repeat(np.arange(first, first + len(lengths), dtype=np.int64), lengths)
                for at in range(0, len(steps), max(1, batch_size)):
                    yield pa.record_batch([pa.array(steps[at : at + batch_size])], [name])
                continue
            mean = max(1, int(lengths.mean()) if len(lengths) else 1)
            for at, array in self._rows(name, group, max(1, batch_size // mean)):
                found = self._lengths_of(array, name, first + at)
                wrong = np.flatnonzero(found != lengths[at : at + len(found)])
                if len(wrong):
                    row = int(wrong[0])
                    raise FormatError(
                        f"row {first + at + row:,} (an episode) holds {int(found[row]):,} steps "
                        f"where {self._named[0]!r} holds {int(lengths[at + row]):,}; an episode's "
                        "lists must be of one length",
                        path=self.path,
                        key=name,
                    )
                yield pa.record_batch([pc.list_flatten(array)], [name])

    def close(self) -> None:
        """Close the table under it."""
        self.table.close()
