"""Arrow IPC (Feather v2) files and streams: read from their columns, never written.

Whoever wrote them (pyarrow's ``ipc.new_file`` and ``feather.write_feather``, polars'
``write_ipc``, HF ``datasets``' cache files, IPC streams), they are read by the
foreign-table reader that reads a Parquet table expcli did not write
(``foreign_table.open_table``): the same conventions, columns and episodes, a record
batch standing for a row group (``_ipc_table``), with the same one warning line. expcli
writes Parquet for the tables it writes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from expcli.errors import ExpcliError, FormatError
from expcli.formats._error_summary import error_summary
from expcli.formats._guards import check_source
from expcli.formats._ipc_table import open_ipc
from expcli.formats.builtin.ipc_file import IPC_FILE
from expcli.formats.column_roles import ColumnRoles
from expcli.formats.dataset import Dataset, read_whole
from expcli.formats.foreign_table import open_table
from expcli.formats.rows import WritePlan

__all__ = ["open_lazy", "read", "write"]


def open_lazy(
    path: Path,
    *,
    num_envs: int | None = None,
    cache: object | None = None,
    mapping: ColumnRoles | None = None,
) -> tuple[Dataset, Callable[[], None]]:
    """Open an Arrow IPC file or stream; each tensor's rows are read a record batch at a time.

    ``mapping``: the roles the caller gives columns, and what a lone ``done`` means.

    Raises:
        FormatError: Not an Arrow IPC file or stream, truncated or damaged, or as
            ``foreign_table.open_table``.
        MissingDependencyError: pyarrow is not installed.
    """
    del num_envs, cache
    check_source(path)
    table = open_ipc(path)
    what = "an Arrow IPC stream" if table.stream else "an Arrow IPC file"
    try:
        return open_table(table, path, what, mapping=mapping)
    except BaseException as e:
        table.close()
        if isinstance(e, ExpcliError | MemoryError) or not isinstance(e, Exception):
            raise
        raise FormatError(f"cannot be read: {error_summary(e)}", path=path) from e


def read(path: Path, *, num_envs: int | None = None) -> Dataset:
    """Load an Arrow IPC file or stream whole, when memory has room for it.

    Raises:
        FormatError, MissingDependencyError: As ``open_lazy``.
        ConfigError: The memory available cannot hold the data (said before reading any).
    """
    return read_whole(open_lazy(path, num_envs=num_envs), path)


def write(dataset: Dataset, plan: WritePlan) -> None:
    """Refuse: expcli writes its tables as Parquet.

    Raises:
        ConfigError: Always (``IpcFile.refuse_write``).
    """
    del dataset
    IPC_FILE.refuse_write(plan.target)
