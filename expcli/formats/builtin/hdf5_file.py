"""The ``hdf5`` format: one chunked dataset per tensor at the root (``hdf5_format``).

A file without expcli's metadata is offered to the foreign layouts of the table that read
HDF5 (tianshou, Minari, D4RL), in order.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from expcli.formats._sniffing import is_hdf5
from expcli.formats.rows import Closer, Layout, ModuleFormat
from expcli.formats.table import foreign_hdf5_titles, read_foreign_hdf5

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache
    from expcli.formats.dataset import Dataset

__all__ = ["HDF5_FILE", "Hdf5File"]


class Hdf5File(ModuleFormat):
    """``.h5``/``.hdf5`` files, gzip or lzf optional; compressed blocks kept in a cache."""

    name = "hdf5"
    suffixes = (".h5", ".hdf5")
    holds = "an HDF5 file"
    compressions = ("none", "gzip", "lzf")
    layouts = (Layout.EXPCLI, Layout.TIANSHOU, Layout.MINARI, Layout.D4RL)
    title = "HDF5"
    work = "expcli.formats.hdf5_format"

    def sniff(self, path: Path, head: bytes) -> bool:
        """The HDF5 signature."""
        return is_hdf5(path, head)

    def _foreign(self) -> Any:
        """The foreign layouts an HDF5 file without expcli's metadata is offered to."""
        return self.module.ForeignLayouts(read_foreign_hdf5, foreign_hdf5_titles())

    def read(self, path: Path, *, num_envs: int | None = None) -> Dataset:
        """Read the file whole, offering one without expcli's metadata to the layouts."""
        found: Dataset = self.module.read(path, num_envs=num_envs, foreign=self._foreign())
        return found

    def open_lazy(
        self, path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
    ) -> tuple[Dataset, Closer]:
        """Open the file with its datasets read by slices of rows."""
        opened: tuple[Dataset, Closer] = self.module.open_lazy(
            path, num_envs=num_envs, foreign=self._foreign(), cache=cache
        )
        return opened


HDF5_FILE = Hdf5File()
