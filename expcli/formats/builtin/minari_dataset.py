"""The ``minari`` layout: a Minari dataset folder, or its ``main_data.hdf5`` (``minari.layout``).

Its storage is hdf5 (the default), parquet or arrow (``minari.arrow``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from expcli.formats.rows import Closer, FileLayout, Layout, WritePlan

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["MINARI_DATASET", "MinariDataset"]


class MinariDataset(FileLayout):
    """Episodes one after another, one env column; the writer says what it does not keep."""

    name = Layout.MINARI
    title = "Minari"
    storage = "hdf5"
    work = "expcli.formats.layouts.minari.layout"
    storages = ("hdf5", "parquet", "arrow")
    keeps_authorship = True

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the dataset folder atomically, in ``plan.format`` (its storage)."""
        target, overwrite, authorship = plan.target, plan.overwrite, plan.authorship
        if plan.format == "hdf5" or plan.format not in self.storages:
            self.module.write(dataset, target, overwrite=overwrite, authorship=authorship)
        else:
            from expcli.formats.layouts.minari import arrow

            arrow.write(
                dataset, target, overwrite=overwrite, storage=plan.format, authorship=authorship
            )

    def refuse_target(self, plan: WritePlan) -> None:
        """A folder not named as a Minari dataset id (``NAME-vN``: ``minari.layout.dataset_id``)."""
        super().refuse_target(plan)
        self.module.dataset_id(plan.target)

    def read_hdf5(self, h5: Any, path: Path, num_envs: int | None, lazy: bool) -> Dataset | None:
        """A file of ``episode_<id>`` groups only."""
        found = self.module.is_minari_file(h5, path)
        return self.module.read(h5, path, lazy=lazy) if found else None

    def marks(self, path: Path) -> bool:
        """A ``metadata.json`` in the folder or its ``data`` folder, whatever it holds."""
        return any(os.path.lexists(p / "metadata.json") for p in (path / "data", path))

    def read_folder(self, path: Path) -> Dataset:
        """Read the folder (any storage) whole."""
        found: Dataset = self.module.read_folder(path)
        return found

    def open_folder(self, path: Path) -> tuple[Dataset, Closer]:
        """Open the folder with its rows read a slice at a time."""
        opened: tuple[Dataset, Closer] = self.module.open_folder(path)
        return opened


MINARI_DATASET = MinariDataset()
