"""The ``lerobot`` layout: a LeRobot v3.0 dataset folder (``lerobot.layout``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from expcli.formats.rows import Closer, FileLayout, Layout, WritePlan

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["LEROBOT_DATASET", "LerobotDataset"]


class LerobotDataset(FileLayout):
    """``meta/info.json`` and ``data/chunk-*/*.parquet``, which ``LeRobotDataset`` loads."""

    name = Layout.LEROBOT
    work = "expcli.formats.layouts.lerobot.layout"
    title = "LeRobot"
    storage = "parquet"
    storages = ("parquet", "video")  # video: uint8 (H, W, 3) tensors as lossy MP4

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the dataset folder atomically, in ``plan.format`` (its storage)."""
        if plan.format in self.storages:
            self.module.write(dataset, plan.target, overwrite=plan.overwrite, storage=plan.format)
        else:
            self.module.write(dataset, plan.target, overwrite=plan.overwrite)

    def read_folder(self, path: Path) -> Dataset:
        """Read the folder whole."""
        found: Dataset = self.module.read_lerobot(path)
        return found

    def open_folder(self, path: Path) -> tuple[Dataset, Closer]:
        """Open the folder with its rows left in its files."""
        opened: tuple[Dataset, Closer] = self.module.open_lerobot(path)
        return opened

    def claims(self, path: Path) -> bool:
        """A folder holding LeRobot's ``meta/info.json``."""
        return bool(self.module.is_lerobot_folder(path))


LEROBOT_DATASET = LerobotDataset()
