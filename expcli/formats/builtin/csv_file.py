"""The ``csv`` format: one row per transition, skrl's header, a JSON sidecar (``csv_format``)."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING

from expcli.formats._sniffing import looks_like_csv
from expcli.formats.rows import Layout, ModuleFormat, SpaceEstimate

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["CSV_FILE", "CsvFile"]


class CsvFile(ModuleFormat):
    """``.csv`` files: columns ``name.i`` in (t, env) order, the metadata in ``FILE.meta.json``.

    Opened lazily, its rows are parsed once and read back by slices. Every next observation
    is stored (``frames`` does not apply).
    """

    name = "csv"
    suffixes = (".csv",)
    holds = "comma-separated text"
    space = SpaceEstimate.TEXT
    layouts = (Layout.EXPCLI, Layout.SKRL)
    stream_note = "rows only"
    stream_text = True
    stream_rank = 2
    work = "expcli.formats.csv_format"

    def sniff(self, path: Path, head: bytes) -> bool:
        """Printable text whose first line is a header of ``NAME.INDEX`` columns."""
        return looks_like_csv(path, head)

    def write_stream(self, dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
        """Write the rows (no sidecar) front to back."""
        self.module.write_rows(dataset, out)

    def companions(self, path: Path) -> tuple[Path, ...]:
        """The metadata sidecar ``PATH.meta.json``."""
        return (self.module.sidecar_path(path),)

    def unrecorded_envs(self, path: Path) -> str | None:
        """A CSV file without its sidecar does not record its env columns."""
        return None if self.module.sidecar_path(path).exists() else "a CSV file without its sidecar"


CSV_FILE = CsvFile()
