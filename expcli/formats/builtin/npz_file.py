"""The ``npz`` format: a zip archive of ``.npy`` members, the shards' default (``npz_format``)."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING

from expcli.formats._sniffing import is_npy_zip
from expcli.formats.rows import Layout, ModuleFormat, WritePlan, WrittenShard

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["NPZ_FILE", "NpzFile"]


class NpzFile(ModuleFormat):
    """``.npz`` files: one member per tensor, the metadata a 0-d unicode array ``__expcli__``.

    Read with ``np.load(allow_pickle=False)``; opened lazily, members are read by slices of
    rows. Its shards are uncompressed, so their members are read over a memory mapping.
    """

    name = "npz"
    suffixes = (".npz",)
    holds = "a zip archive of .npy members"
    layouts = (Layout.EXPCLI, Layout.SKRL)
    shards_mapped = True
    work = "expcli.formats.npz_format"

    def sniff(self, path: Path, head: bytes) -> bool:
        """A zip archive of ``.npy`` members."""
        return is_npy_zip(path, head)

    def write_stream(self, dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
        """Write the archive front to back."""
        self.module.write_stream(dataset, out, source)

    def write_shard(
        self, shard: Dataset, path: Path, plan: WritePlan, after: object | None
    ) -> WrittenShard:
        """Write an uncompressed shard whole, then rename it into place."""
        written: WrittenShard = self.module.write_shard(shard, path, plan.frames)
        return written


NPZ_FILE = NpzFile()
