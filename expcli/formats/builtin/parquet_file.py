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

PARQUET_CARD = """- `shard-*.parquet`: one row per transition, episode by episode (each episode's
  rows together, `frame_index` 0, 1, 2...; one still running at a shard's end goes on in
  the next shard): `index`, `episode_index`, `frame_index`, `env`, `row`, `timestamp`,
  then one column per tensor (`observations`, `actions`, `rewards`, `terminated`,
  `truncated`, ...). Each shard's footer holds the whole expcli metadata.
- `manifest.json`: the complete shards (a reader of the glob sees the same rows once a run
  has ended), their sizes and CRC-32s.

`datasets.load_dataset(FOLDER)` reads the shards as this card's `default` config;
`polars.scan_parquet("FOLDER/shard-*.parquet")`, duckdb's
`read_parquet('FOLDER/shard-*.parquet')` and `ray.data.read_parquet("FOLDER")` too.

### Next observations

`next_observations` is null where it is the `observations` of the same `env` one `row`
on (stored once; expcli fills it in when it reads). One line gets it back, whatever the
order of the rows (for a structured space, the same for each `next_observations/KEY`).
duckdb:

```sql
select * replace (coalesce(next_observations, lead(observations) over w,
                           first_value(observations) over w) as next_observations)
from read_parquet('FOLDER/shard-*.parquet') window w as (partition by env order by "row")
```

polars, and HF `datasets` through polars (`ds` a `datasets.Dataset` of the shards):

```python
NEXT = pl.coalesce("next_observations",
                   pl.col("observations").shift(-1).over("env", order_by="row"),
                   pl.col("observations").sort_by("row").first().over("env"))
frame = pl.scan_parquet("FOLDER/shard-*.parquet").with_columns(NEXT.alias("next_observations"))
ds = Dataset.from_polars(ds.to_polars().with_columns(NEXT.alias("next_observations")))
```
"""
"""The Files section of the card of a folder of Parquet shards (``dataset_card``)."""


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
