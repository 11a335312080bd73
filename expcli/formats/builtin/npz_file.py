"""The ``npz`` format: a zip archive of ``.npy`` members, the shards' default (``npz_format``)."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING

from expcli.formats._sniffing import is_npy_zip
from expcli.formats.rows import Closer, Format, Layout, WritePlan, WrittenShard
from expcli.spec import FramesForm

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache
    from expcli.formats.dataset import Dataset

__all__ = ["NPZ_FILE", "NpzFile"]


class NpzFile(Format):
    """``.npz`` files: one member per tensor, the metadata a 0-d unicode array ``__expcli__``.

    Its shards are uncompressed, so their members are read over a memory mapping.
    """

    name = "npz"
    suffixes = (".npz",)
    holds = "a zip archive of .npy members"
    layouts = (Layout.EXPCLI, Layout.SKRL)
    shards_mapped = True

    def sniff(self, path: Path, head: bytes) -> bool:
        """A zip archive of ``.npy`` members."""
        return is_npy_zip(path, head)

    def read(self, path: Path, *, num_envs: int | None = None) -> Dataset:
        """Read the file whole (``np.load(allow_pickle=False)``)."""
        from expcli.formats import npz_format

        return npz_format.read(path, num_envs=num_envs)

    def open_lazy(
        self, path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
    ) -> tuple[Dataset, Closer]:
        """Open the file with its members read by slices of rows."""
        from expcli.formats import npz_format

        return npz_format.open_lazy(path, num_envs=num_envs)

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the file atomically."""
        from expcli.formats import npz_format

        npz_format.write(dataset, plan.target, overwrite=plan.overwrite, frames=plan.frames)

    def write_stream(self, dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
        """Write the archive front to back."""
        from expcli.formats import npz_format
        from expcli.formats.header import encode_header

        npz_format.write_to(dataset, out, encode_header(dataset.header(), source))

    def write_shard(
        self,
        shard: Dataset,
        path: Path,
        *,
        frames: FramesForm,
        compression: str | None,
        after: object | None,
    ) -> WrittenShard:
        """Write an uncompressed shard whole, then rename it into place."""
        from expcli.formats import npz_format

        return npz_format.write_shard(shard, path, frames)


NPZ_FILE = NpzFile()
