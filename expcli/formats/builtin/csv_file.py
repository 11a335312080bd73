"""The ``csv`` format: one row per transition, skrl's header, a JSON sidecar (``csv_format``)."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING

from expcli.formats._sniffing import looks_like_csv
from expcli.formats.rows import Closer, Format, Layout, SpaceEstimate, WritePlan

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache
    from expcli.formats.dataset import Dataset

__all__ = ["CSV_FILE", "CsvFile"]


class CsvFile(Format):
    """``.csv`` files: columns ``name.i`` in (t, env) order, the metadata in ``FILE.meta.json``.

    Every next observation is stored (``frames`` does not apply).
    """

    name = "csv"
    suffixes = (".csv",)
    holds = "comma-separated text"
    space = SpaceEstimate.TEXT
    layouts = (Layout.EXPCLI, Layout.SKRL)
    stream_note = "rows only"
    stream_text = True
    stream_rank = 2

    def sniff(self, path: Path, head: bytes) -> bool:
        """Printable text whose first line is a header of ``NAME.INDEX`` columns."""
        return looks_like_csv(path, head)

    def read(self, path: Path, *, num_envs: int | None = None) -> Dataset:
        """Read the file whole."""
        from expcli.formats import csv_format

        return csv_format.read(path, num_envs=num_envs)

    def open_lazy(
        self, path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
    ) -> tuple[Dataset, Closer]:
        """Open the file with its rows parsed once, read back by slices."""
        from expcli.formats import csv_format

        return csv_format.open_lazy(path, num_envs=num_envs)

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the file and its sidecar atomically."""
        from expcli.formats import csv_format

        csv_format.write(dataset, plan.target, overwrite=plan.overwrite)

    def write_stream(self, dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
        """Write the rows (no sidecar) front to back."""
        from expcli.formats import csv_format

        csv_format.write_rows(dataset, out)

    def companions(self, path: Path) -> tuple[Path, ...]:
        """The metadata sidecar ``PATH.meta.json``."""
        from expcli.formats.csv_format import sidecar_path

        return (sidecar_path(path),)

    def unrecorded_envs(self, path: Path) -> str | None:
        """A CSV file without its sidecar does not record its env columns."""
        from expcli.formats.csv_format import sidecar_path

        return None if sidecar_path(path).exists() else "a CSV file without its sidecar"


CSV_FILE = CsvFile()
