"""The ``d4rl`` layout: D4RL HDF5 files, one row per transition (``d4rl_layout``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from expcli.formats.rows import FileLayout, Layout, WritePlan

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["D4RL_FILE", "D4rlFile"]


class D4rlFile(FileLayout):
    """``observations``, ``actions``, ``rewards``, ``terminals``, ``timeouts`` at the root."""

    name = Layout.D4RL
    work = "expcli.formats.layouts.d4rl_layout"
    formats = ("hdf5",)
    title = "D4RL"

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the file atomically, env column by env column."""
        self.module.write(dataset, plan.target, overwrite=plan.overwrite)

    def read_hdf5(self, h5: Any, path: Path, num_envs: int | None, lazy: bool) -> Dataset | None:
        """A file of D4RL's datasets at the root; ``num_envs`` splits its rows."""
        return self.module.read(h5, path, num_envs, lazy=lazy) if self.module.is_d4rl(h5) else None

    def losses(self, dataset: Dataset, storage: str) -> list[str]:
        """The env columns and the circular state."""
        return list(self.module.losses(dataset))


D4RL_FILE = D4rlFile()
