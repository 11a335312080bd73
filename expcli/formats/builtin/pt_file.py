"""The ``pt`` format: a ``torch.save`` zip archive, skrl's memory export (``pt_format``)."""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING

from expcli.formats._sniffing import is_torch_file
from expcli.formats.rows import Layout, ModuleFormat

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["PT_FILE", "PtFile"]


class PtFile(ModuleFormat):
    """``.pt`` files: a dict of tensors and the metadata at ``__expcli__``, mapped on read.

    Read as ``torch.load(weights_only=True)`` would, never unpickling code.
    """

    name = "pt"
    suffixes = (".pt", ".pth")
    holds = "a torch.save zip archive"
    layouts = (Layout.EXPCLI, Layout.SKRL)
    stream_rank = 1
    work = "expcli.formats.pt_format"

    def sniff(self, path: Path, head: bytes) -> bool:
        """A zip archive holding a ``data.pkl``, or torch's legacy pickle."""
        return is_torch_file(path, head)

    def write_stream(self, dataset: Dataset, out: IO[bytes], source: str | PathLike[str]) -> None:
        """Write the archive front to back."""
        self.module.write_stream(dataset, out, source)


PT_FILE = PtFile()
