"""The ``skrl`` layout: skrl's memory exports, a full memory from row 0 (``skrl_layout``).

Read by the pt, npz and csv readers (a file without expcli's metadata is one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from expcli.formats.rows import FileLayout, Layout, WritePlan

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["SKRL_EXPORT", "SkrlExport"]


class SkrlExport(FileLayout):
    """skrl's ``Memory.save``: pt, npz or csv, no metadata."""

    name = Layout.SKRL
    work = "expcli.formats.layouts.skrl_layout"
    formats = ("pt", "npz", "csv")
    keeps_metadata = False

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the export atomically, in the format its suffix names."""
        self.module.write(dataset, plan.target, overwrite=plan.overwrite)

    def losses(self, dataset: Dataset, storage: str) -> list[str]:
        """The circular state and the metadata, and what ``storage`` cannot keep."""
        return list(self.module.losses(dataset, storage))


SKRL_EXPORT = SkrlExport()
