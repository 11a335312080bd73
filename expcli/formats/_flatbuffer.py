"""A flatbuffer read from a file's bytes, every offset checked: Arrow's schemas and messages.

Arrow writes its IPC messages, an IPC file's footer and the schema a Parquet file keeps
(``ARROW:schema``) as flatbuffers. expcli reads a few fields of them itself, before pyarrow
acts on them (``_arrow_schema``: the extension types a schema declares; ``_ipc_messages``:
what a record batch will inflate to). Their bytes come from the file, so each read is
checked against the buffer's length, and the tables visited are bounded in number: a
damaged or hostile buffer raises ``Damaged``, which the caller says in one line.
"""

from __future__ import annotations

import struct

__all__ = ["Damaged", "Flatbuffer"]

MOST_TABLES = 1 << 20
"""Tables visited at most in one buffer, whatever its offsets say."""


class Damaged(Exception):
    """An offset or a length points outside the buffer, or too many tables were visited."""


class Flatbuffer:
    """A flatbuffer, each read bounds-checked.

    Positions are offsets into ``data``; a table's fields are asked by their number in
    the schema (``field``), and followed to a table, vector or string where they hold an
    offset.
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._visits = 0

    def unpack(self, form: str, at: int) -> int:
        """The number of ``struct`` format ``form`` at ``at``."""
        if at < 0 or at + struct.calcsize(form) > len(self.data):
            raise Damaged
        return int(struct.unpack_from(form, self.data, at)[0])

    def root(self) -> int:
        """The root table."""
        return self.table(self.follow(0))

    def table(self, at: int) -> int:
        """The table at ``at`` (counted against ``MOST_TABLES``)."""
        self._visits += 1
        if self._visits > MOST_TABLES:
            raise Damaged
        self.unpack("<i", at)
        return at

    def field(self, table: int, index: int) -> int | None:
        """Where field ``index`` of the table at ``table`` lies (None: absent)."""
        vtable = table - self.unpack("<i", table)
        if 4 + 2 * index + 2 > self.unpack("<H", vtable):
            return None
        offset = self.unpack("<H", vtable + 4 + 2 * index)
        return table + offset if offset else None

    def scalar(self, table: int, index: int, form: str, default: int = 0) -> int:
        """Field ``index``, a number of format ``form`` (``default`` where absent)."""
        at = self.field(table, index)
        return default if at is None else self.unpack(form, at)

    def follow(self, at: int) -> int:
        """Where the offset stored at ``at`` points."""
        return at + self.unpack("<I", at)

    def child(self, table: int, index: int) -> int | None:
        """Field ``index``, a table, followed (None: absent)."""
        at = self.field(table, index)
        return None if at is None else self.table(self.follow(at))

    def tables(self, at: int | None) -> list[int]:
        """The positions of a vector of tables or strings whose offset lies at ``at``."""
        if at is None:
            return []
        start = self.follow(at)
        count = self.unpack("<I", start)
        if start + 4 + 4 * count > len(self.data):
            raise Damaged
        return [self.follow(start + 4 + 4 * i) for i in range(count)]

    def structs(self, table: int, index: int, size: int) -> range:
        """The positions of field ``index``'s vector of structs of ``size`` bytes."""
        at = self.field(table, index)
        if at is None:
            return range(0)
        start = self.follow(at)
        count = self.unpack("<I", start)
        if start + 4 + count * size > len(self.data):
            raise Damaged
        return range(start + 4, start + 4 + count * size, size)

    def string(self, at: int) -> bytes:
        """The string whose offset lies at ``at``."""
        start = self.follow(at)
        length = self.unpack("<I", start)
        if start + 4 + length > len(self.data):
            raise Damaged
        return self.data[start + 4 : start + 4 + length]
