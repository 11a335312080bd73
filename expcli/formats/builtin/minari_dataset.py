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

__all__ = ["MINARI_CARD", "MINARI_DATASET", "MinariDataset"]

MINARI_CARD = """- `data/metadata.json`: Minari's metadata (the dataset id, the env spec, the
  spaces, the counts, the author and algorithm where given).
- {episodes}

`minari.load_dataset(ID)` loads it once the folder sits under Minari's datasets root as
`ROOT/ID`; `expcli convert FOLDER OUT` converts it back.
"""
"""The Files section of a Minari folder's card (``dataset_card``), its storage filled in."""
_EPISODES = {
    "hdf5": "`data/main_data.hdf5`: the episodes, a group `episode_N` each.",
    "parquet": "`data/N/`: episode N: `metadata.json` and `part-0.parquet`, one row a "
    "step and one more for the last observation (Minari's layout).",
    "arrow": "`data/N/`: episode N: `metadata.json` and `part-0.arrow`, one row a "
    "step and one more for the last observation (Minari's layout).",
}
_NO_CONFIGS = (
    "The card lists no data files: `datasets` cannot read HDF5. Convert the folder "
    "(`expcli convert FOLDER OUT --layout minari --to parquet`) for a copy it reads."
)


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
        from expcli.formats.dataset_card import FolderKind, write_layout_card

        target, overwrite, authorship = plan.target, plan.overwrite, plan.authorship
        storage = plan.format if plan.format in self.storages else "hdf5"
        if storage == "hdf5":
            self.module.write(dataset, target, overwrite=overwrite, authorship=authorship)
        else:
            from expcli.formats.layouts.minari import arrow

            arrow.write(
                dataset, target, overwrite=overwrite, storage=plan.format, authorship=authorship
            )
        files = MINARI_CARD.format(episodes=_EPISODES[storage])
        globs = () if storage == "hdf5" else (f"data/*/*.{storage}",)
        what = FolderKind(f"a Minari dataset ({storage})", files, globs, ("Minari",), _NO_CONFIGS)
        write_layout_card(dataset, target, what, plan.license)

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
