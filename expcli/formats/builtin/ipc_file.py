"""The ``ipc`` format: Arrow IPC (Feather v2) files and streams, read only (``ipc_format``)."""

from __future__ import annotations

from pathlib import Path

from expcli.errors import ConfigError
from expcli.formats._sniffing import is_arrow_ipc
from expcli.formats.rows import SpaceEstimate, TableFormat

__all__ = ["IPC_FILE", "NOT_WRITTEN", "IpcFile"]

NOT_WRITTEN = "expcli does not write Arrow IPC; use parquet"
"""The refusal of a write (``convert --to ipc``, an output named ``.arrow``)."""


class IpcFile(TableFormat):
    """``.arrow``, ``.feather`` and ``.ipc`` files that another tool wrote, read from their columns.

    Their record batches are read one at a time by the foreign-table reader that reads
    Parquet tables expcli did not write; expcli does not write them (``refuse_write``).
    """

    name = "ipc"
    suffixes = (".arrow", ".feather", ".ipc")
    holds = "an Arrow IPC (Feather) file"
    space = SpaceEstimate.UNKNOWN
    title = "Arrow IPC"
    work = "expcli.formats.ipc_format"

    def sniff(self, path: Path, head: bytes) -> bool:
        """The ``ARROW1`` magic of an IPC file (a stream is told by its suffix)."""
        return is_arrow_ipc(path, head)

    def refuse_write(self, target: Path) -> None:
        """Refuse: expcli writes the tables it writes as Parquet.

        Raises:
            ConfigError: Always (``NOT_WRITTEN``).
        """
        raise ConfigError(f"{target}: {NOT_WRITTEN}")


IPC_FILE = IpcFile()
