"""The ``parquet`` format: one row per transition, chronological (``parquet_format``).

Also a shard format: a folder of Parquet shards is what HF ``datasets``, polars, duckdb and
Ray Data open as it is, so it gets a dataset card (``PARQUET_CARD``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from expcli.formats._sniffing import is_parquet
from expcli.formats.rows import SpaceEstimate, TableFormat, WritePlan, WrittenShard

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["PARQUET_CARD", "PARQUET_FILE", "ParquetFile"]

PARQUET_CARD = """# An expcli dataset: Parquet shards

One row per transition, in the order collected: `index`, `episode_index`, `frame_index`,
`env`, `row`, then one column per tensor (`observations`, `actions`, `rewards`,
`terminated`, `truncated`, ...). `next_observations` is null where it is the
`observations` of the next `row` of the same `env` (stored once). `manifest.json` lists the
complete shards (a reader of
the glob `shard-*.parquet` sees the same rows once a run has ended); each shard's footer
holds the whole expcli metadata. Written by expcli; `expcli inspect` describes it.

`datasets.load_dataset(FOLDER)` reads the shards (it prefers Parquet files to the one JSON
file), `polars.scan_parquet("FOLDER/shard-*.parquet")`, duckdb's
`read_parquet('FOLDER/shard-*.parquet')` and `ray.data.read_parquet("FOLDER")` too.
"""
"""The dataset card of a folder of Parquet shards (no YAML ``configs``: see ``sharded``)."""


class ParquetFile(TableFormat):
    """``.parquet`` files: row groups, zstd by default; decoded groups kept in a cache.

    Opened lazily, its row groups are read as they are asked for.
    """

    name = "parquet"
    suffixes = (".parquet",)
    holds = "a Parquet file"
    compressions = ("zstd", "snappy", "gzip", "none")
    space = SpaceEstimate.UNKNOWN
    title = "Parquet"
    shard_card = PARQUET_CARD
    work = "expcli.formats.parquet_format"

    def sniff(self, path: Path, head: bytes) -> bool:
        """The ``PAR1`` magic."""
        return is_parquet(path, head)

    def write_shard(
        self, shard: Dataset, path: Path, plan: WritePlan, after: object | None
    ) -> WrittenShard:
        """Write a shard whose bookkeeping columns continue those of the shard before."""
        codec = plan.compression or self.compressions[0]
        written: WrittenShard = self.module.write_shard(
            shard, path, compression=codec, carry=after, frames=plan.frames, images=plan.images
        )
        return written

    def shard_carry(self, path: Path) -> object | None:
        """The bookkeeping after the shard at ``path`` (its last index, episodes, frames)."""
        carry: object | None = self.module.shard_carry(path)
        return carry


PARQUET_FILE = ParquetFile()
