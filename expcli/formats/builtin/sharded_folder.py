"""The ``folder`` format: a sharded dataset folder, shards and a manifest (``sharded``).

Its shards are files of another format that can be one (``Format.write_shard``): npz by
default, or Parquet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from expcli.formats.rows import ModuleFormat, WritePlan

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["FOLDER_FORMAT", "ShardedFolder"]


class ShardedFolder(ModuleFormat):
    """A folder of shards of contiguous rows, listed by its ``manifest.json``.

    Opened lazily, its shards are opened as their rows are asked for.
    """

    name = "folder"
    suffixes = ()
    holds = "a sharded dataset folder"
    work = "expcli.formats.sharded"

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the folder, its shards in ``plan.shard_format`` (None: npz), atomically."""
        self.module.write(
            dataset,
            plan.target,
            overwrite=plan.overwrite,
            shard_format=plan.shard_format,
            compression=plan.compression,
            frames=plan.frames,
            license=plan.license,
            images=plan.images,
        )


FOLDER_FORMAT = ShardedFolder()
