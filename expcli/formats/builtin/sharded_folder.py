"""The ``folder`` format: a sharded dataset folder, shards and a manifest (``sharded``).

Its shards are files of another format that can be one (``Format.write_shard``): npz by
default, or Parquet.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from expcli.formats.rows import Closer, Format, WritePlan

if TYPE_CHECKING:
    from expcli.formats.block_cache import BlockCache
    from expcli.formats.dataset import Dataset

__all__ = ["FOLDER_FORMAT", "ShardedFolder"]


class ShardedFolder(Format):
    """A folder of shards of contiguous rows, listed by its ``manifest.json``."""

    name = "folder"
    suffixes = ()
    holds = "a sharded dataset folder"

    def read(self, path: Path, *, num_envs: int | None = None) -> Dataset:
        """Read every shard whole."""
        from expcli.formats import sharded

        return sharded.read(path, num_envs=num_envs)

    def open_lazy(
        self, path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
    ) -> tuple[Dataset, Closer]:
        """Open the folder with its shards opened as their rows are asked for."""
        from expcli.formats import sharded

        return sharded.open_lazy(path, num_envs=num_envs, cache=cache)

    def write(self, dataset: Dataset, plan: WritePlan) -> None:
        """Write the folder, its shards in ``plan.shard_format`` (None: npz), atomically."""
        from expcli.formats import sharded

        sharded.write(
            dataset,
            plan.target,
            overwrite=plan.overwrite,
            shard_format=plan.shard_format,
            compression=plan.compression,
            frames=plan.frames,
        )


FOLDER_FORMAT = ShardedFolder()
