"""The ``lerobot`` layout: a LeRobot v3.0 dataset folder (``lerobot.layout``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from expcli.formats.rows import Closer, FileLayout, Layout, WritePlan

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["LEROBOT_CARD", "LEROBOT_DATASET", "LerobotDataset"]

LEROBOT_CARD = """- `meta/info.json`: the features, their shapes and dtypes, `fps`, the counts and
  the paths of the files; `meta/stats.json`: each feature's statistics; `meta/tasks.parquet`;
  `meta/episodes/chunk-*/file-*.parquet`: where each episode lies.
- `data/chunk-*/file-*.parquet`: one row per frame, episode by episode (`episode_index`,
  `frame_index`, `timestamp`, `index`, `task_index`, `next.done`, then the features).
- `videos/`: the image features stored as MP4, where written with `--to video`.
- `meta/expcli.json`: expcli's metadata, so that `expcli convert` gives the data back.

`lerobot.datasets.lerobot_dataset.LeRobotDataset(REPO_ID, root=FOLDER)` loads the folder;
`datasets.load_dataset(FOLDER)` reads the frames as this card's `default` config.
"""
"""The Files section of a LeRobot folder's card (``dataset_card``)."""


class LerobotDataset(FileLayout):
    """``meta/info.json`` and ``data/chunk-*/*.parquet``, which ``LeRobotDataset`` loads."""

    name = Layout.LEROBOT
    work = "expcli.formats.layouts.lerobot.layout"
    title = "LeRobot"
    storage = "parquet"
    storages = ("parquet", "video")  # video: uint8 (H, W, 3) tensors as lossy MP4

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the dataset folder atomically, in ``plan.format`` (its storage), then its card."""
        from expcli.formats.dataset_card import FolderKind, write_layout_card

        if plan.format in self.storages:
            self.module.write(dataset, plan.target, overwrite=plan.overwrite, storage=plan.format)
        else:
            self.module.write(dataset, plan.target, overwrite=plan.overwrite)
        what = FolderKind(
            "a LeRobot v3.0 dataset", LEROBOT_CARD, ("data/*/*.parquet",), ("LeRobot",)
        )
        write_layout_card(dataset, plan.target, what, plan.license)

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
