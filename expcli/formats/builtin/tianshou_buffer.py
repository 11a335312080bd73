"""The ``tianshou`` layout: ``ReplayBuffer.save_hdf5`` files (``tianshou_layout``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from expcli.formats.rows import FileLayout, Layout, WritePlan

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["TIANSHOU_BUFFER", "TianshouBuffer"]


class TianshouBuffer(FileLayout):
    """A ReplayBuffer or VectorReplayBuffer saved to HDF5, no metadata."""

    name = Layout.TIANSHOU
    work = "expcli.formats.layouts.tianshou_layout"
    formats = ("hdf5",)
    title = "tianshou"
    keeps_metadata = False

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the buffer's HDF5 file atomically."""
        self.module.write(dataset, plan.target, overwrite=plan.overwrite)

    def read_hdf5(self, h5: Any, path: Path, num_envs: int | None, lazy: bool) -> Dataset | None:
        """A file with a ``_meta`` group and a ``maxsize`` attribute."""
        return self.module.read(h5, path, lazy=lazy) if self.module.is_tianshou(h5) else None

    def losses(self, dataset: Dataset, storage: str) -> list[str]:
        """The metadata, and what a buffer of its env columns cannot keep."""
        return list(self.module.losses(dataset))


TIANSHOU_BUFFER = TianshouBuffer()
