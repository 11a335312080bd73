"""The one line each of duckdb, polars and HF ``datasets`` that fills the next observations
a frames-once Parquet file leaves null, run on such files and compared, bit for bit, with
expcli's own next observations.

The lines are the ones the formats guide and the card of a Parquet folder print (checked
here, whitespace aside). They partition by ``env`` and order by ``row``, never by file
position: a copy of the file whose rows are in another order (episode by episode, or
shuffled) gives the same cells. Two features: a small one (nested lists, 64 bytes) and
frames (fixed-size binary); a wrapped single file (``row`` 0 follows the last) and a folder
of shards (``row`` counts across them).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from expcli.conversion import load, save
from expcli.formats import Dataset, sharded
from expcli.formats.builtin.parquet_file import PARQUET_CARD
from expcli.spec import CircularState

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "formats.md"
NEXT = (
    'pl.coalesce("next_observations", '
    'pl.col("observations").shift(-1).over("env", order_by="row"), '
    'pl.col("observations").sort_by("row").first().over("env"))'
)
DUCKDB = (
    "select * replace (coalesce(next_observations, lead(observations) over w, "
    "first_value(observations) over w) as next_observations) "
    "from read_parquet('{}') window w as (partition by env order by \"row\")"
)
HF = 'Dataset.from_polars(ds.to_polars().with_columns(NEXT.alias("next_observations")))'
SIZE, ENVS = 40, 3


def _flat(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _frames_run(shape: tuple[int, ...], state: CircularState) -> Dataset:
    """Episodes whose next observations are the next step's but at their ends.

    Stored as a circular memory stores them: step ``s`` at row ``(s + head) % T``, so that
    row 0 follows the last row.
    """
    rng = np.random.default_rng(sum(shape))
    steps = rng.integers(0, 255, (SIZE + 1, ENVS, *shape), dtype=np.uint8)
    step = (np.arange(SIZE) - (state.memory_index if state.filled else 0)) % SIZE
    frames, after = steps[step], steps[step + 1]
    done = rng.random((SIZE, ENVS, 1)) < 0.15
    after[done[..., 0]] = 255 - after[done[..., 0]]  # an episode's last: not the next row's
    return Dataset(
        {
            "observations": frames,
            "next_observations": after,
            "actions": rng.integers(0, 4, (SIZE, ENVS, 1)),
            "rewards": rng.standard_normal((SIZE, ENVS, 1)).astype(np.float32),
            "terminated": done,
            "truncated": np.zeros_like(done),
        },
        state,
        {"env_id": "Frames-v0"},
    )


def _assert_filled(env: Any, row: Any, cells: Any, expected: np.ndarray) -> None:
    """Every row's filled cell is expcli's next observation of its env and row, bit for bit."""
    envs, rows = np.asarray(env).tolist(), np.asarray(row).tolist()
    assert sorted(zip(rows, envs, strict=True)) == [
        (t, n) for t in range(SIZE) for n in range(ENVS)
    ]
    for n, t, cell in zip(envs, rows, cells, strict=True):
        want = np.ascontiguousarray(expected[t, n])
        if isinstance(cell, bytes | bytearray | memoryview):
            got = bytes(cell)
        else:
            got = np.asarray(cell, dtype=want.dtype).tobytes()
        assert got == want.tobytes(), (n, t)


def _duckdb(query: str) -> dict[str, list[Any]]:
    """The query's result, column by column, as Python values (lists, bytes)."""
    result = duckdb.sql(query)
    return dict(zip(result.columns, map(list, zip(*result.fetchall(), strict=True)), strict=True))


def _shuffled(path: Path, out: Path) -> None:
    """A copy of ``path`` with its rows in another order (expcli's footer dropped)."""
    table = pq.read_table(path).replace_schema_metadata(None)
    order = np.random.default_rng(0).permutation(table.num_rows)
    pq.write_table(table.take(order), out)


@pytest.fixture(params=[(4, 4, 4), (24, 24, 3)], ids=["lists", "binary"])
def shape(request: pytest.FixtureRequest) -> tuple[int, ...]:
    found: tuple[int, ...] = request.param
    return found


def test_the_lines_are_the_ones_the_guide_and_the_card_print() -> None:
    for text in (GUIDE.read_text(encoding="utf-8"), PARQUET_CARD):
        flat = _flat(text)
        assert _flat(NEXT) in flat.replace("NEXT=", "")
        assert _flat(HF) in flat
        duck = DUCKDB.split(" from ")[0]
        assert (
            _flat(duck) in flat and _flat('window w as (partition by env order by "row")') in flat
        )


def test_duckdb_polars_and_hf_lines_give_expclis_next_observations_of_a_wrapped_file(
    tmp_path: Path, shape: tuple[int, ...]
) -> None:
    from datasets import Dataset as HFDataset
    from datasets import load_dataset

    dataset = _frames_run(shape, CircularState(17, 0, True, SIZE * ENVS * 2))
    path = tmp_path / "run.parquet"
    save(dataset, path, frames="once")
    assert pq.read_table(path, columns=["next_observations"])["next_observations"].null_count > 0
    expected = np.asarray(load(path).tensors["next_observations"])
    assert expected.tobytes() == dataset.tensors["next_observations"].tobytes()
    _shuffled(path, tmp_path / "shuffled.parquet")
    for source in (path, tmp_path / "shuffled.parquet"):
        rows = _duckdb(DUCKDB.format(source))
        _assert_filled(rows["env"], rows["row"], rows["next_observations"], expected)
        NEXT_ = eval(NEXT, {"pl": pl})  # the documented expression, as written
        frame = pl.read_parquet(source).with_columns(NEXT_.alias("next_observations"))
        _assert_filled(frame["env"], frame["row"], frame["next_observations"].to_list(), expected)
        ds = load_dataset("parquet", data_files=str(source), split="train", cache_dir=str(tmp_path))
        ds = eval(HF, {"Dataset": HFDataset, "ds": ds, "NEXT": NEXT_})
        _assert_filled(ds["env"], ds["row"], ds["next_observations"], expected)


def test_the_lines_fill_a_folder_of_shards_as_one_table(
    tmp_path: Path, shape: tuple[int, ...]
) -> None:
    from datasets import Dataset as HFDataset
    from datasets import load_dataset

    dataset = _frames_run(shape, CircularState(0, 0, True, SIZE * ENVS))
    folder = tmp_path / "folder"
    eight_rows = 8 * ENVS * 2 * int(np.prod(shape))  # observations and next ones
    sharded.write(dataset, folder, overwrite=False, shard_bytes=eight_rows, shard_format="parquet")
    shards = sorted(folder.glob("shard-*.parquet"))
    assert len(shards) > 2
    assert pq.read_table(shards, columns=["next_observations"])["next_observations"].null_count
    expected = np.asarray(load(folder).tensors["next_observations"])
    glob = str(folder / "shard-*.parquet")
    rows = _duckdb(DUCKDB.format(glob))
    _assert_filled(rows["env"], rows["row"], rows["next_observations"], expected)
    NEXT_ = eval(NEXT, {"pl": pl})
    frame = pl.scan_parquet(glob).with_columns(NEXT_.alias("next_observations")).collect()
    _assert_filled(frame["env"], frame["row"], frame["next_observations"].to_list(), expected)
    ds = load_dataset(str(folder), split="train", cache_dir=str(tmp_path / "cache"))
    ds = eval(HF, {"Dataset": HFDataset, "ds": ds, "NEXT": NEXT_})
    _assert_filled(ds["env"], ds["row"], ds["next_observations"], expected)
