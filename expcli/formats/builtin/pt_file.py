"""The ``pt`` format: a ``torch.save`` zip archive, skrl's memory export (``pt_format``)."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING

from expcli.formats._sniffing import is_torch_file
from expcli.formats.rows import Closer, Format, Layout, WritePlan

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache
    from expcli.formats.dataset import Dataset

__all__ = ["PT_FILE", "PtFile"]


class PtFile(Format):
    """``.pt`` files: a dict of tensors and the metadata at ``__expcli__``, mapped on read."""

    name = "pt"
    suffixes = (".pt", ".pth")
    holds = "a torch.save zip archive"
    layouts = (Layout.EXPCLI, Layout.SKRL)
    stream_rank = 1

    def sniff(self, path: Path, head: bytes) -> bool:
        """A zip archive holding a ``data.pkl``, or torch's legacy pickle."""
        return is_torch_file(path, head)

    def read(self, path: Path, *, num_envs: int | None = None) -> Dataset:
        """Read the file whole (``torch.load(weights_only=True)``)."""
        from expcli.formats import pt_format

        return pt_format.read(path, num_envs=num_envs)

    def open_lazy(
        self, path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
    ) -> tuple[Dataset, Closer]:
        """Open the file with its tensors mapped."""
        from expcli.formats import pt_format

        return pt_format.open_lazy(path, num_envs=num_envs)

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the file atomically."""
        from expcli.formats import pt_format

        pt_format.write(dataset, plan.target, overwrite=plan.overwrite, frames=plan.frames)

    def write_stream(self, dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
        """Write the archive front to back."""
        from expcli.formats import pt_format
        from expcli.formats.header import encode_header

        pt_format.write_to(dataset, out, encode_header(dataset.header(), source))


PT_FILE = PtFile()
