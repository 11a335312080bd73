"""expcli's Parquet files open unchanged in pyarrow, polars, duckdb and HF ``datasets``, and
each gives back the values expcli holds (episode returns included; frames as PNG cells that
each decodes, HF to ``uint8`` arrays)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from expcli.formats import Dataset, write_dataset
from expcli.spec import CircularState

pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")

SIZE, ENVS = 40, 3


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Dataset, Path, dict[str, Any]]:
    """A CartPole-like run with frames, its Parquet file, and ``expcli inspect --json``."""
    rng = np.random.default_rng(7)
    dataset = Dataset(
        {
            "observations": rng.standard_normal((SIZE, ENVS, 4)).astype(np.float32),
            "next_observations": rng.standard_normal((SIZE, ENVS, 4)).astype(np.float32),
            "actions": rng.integers(0, 2, (SIZE, ENVS)).astype(np.int64),
            "rewards": rng.integers(0, 4, (SIZE, ENVS)).astype(np.float32),
            "terminated": rng.random((SIZE, ENVS)) < 0.1,
            "truncated": rng.random((SIZE, ENVS)) < 0.05,
            "frames": rng.integers(0, 255, (SIZE, ENVS, 42, 42, 3), dtype=np.uint8),
        },
        CircularState(0, 0, True, SIZE * ENVS),
        {"env_id": "CartPole-v1"},
    )
    path = write_dataset(dataset, tmp_path_factory.mktemp("pq") / "run.parquet")
    out = subprocess.run(
        [sys.executable, "-m", "expcli", "inspect", str(path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return dataset, path, json.loads(out.stdout)


def at(dataset: Dataset, name: str, rows: Any, envs: Any) -> np.ndarray:
    return np.asarray(dataset.tensors[name][np.asarray(rows), np.asarray(envs)])


def png(blob: bytes) -> np.ndarray:
    """A PNG cell's pixels, decoded by Pillow (as any reader of the column would)."""
    from PIL import Image

    with Image.open(io.BytesIO(blob)) as image:
        assert image.format == "PNG"
        return np.asarray(image)


def test_pyarrow_read_table(run: tuple[Dataset, Path, dict[str, Any]]) -> None:
    import pyarrow.parquet as pq

    dataset, path, _ = run
    table = pq.read_table(path)
    rows, envs = table["row"].to_numpy(), table["env"].to_numpy()
    obs = table["observations"].combine_chunks().flatten().to_numpy().reshape(-1, 4)
    assert np.array_equal(obs, at(dataset, "observations", rows, envs))
    cells = table["frames"].combine_chunks()
    assert cells.field("path").null_count == len(cells)  # HF's Image struct, bytes alone
    frames = np.stack([png(b) for b in cells.field("bytes").to_pylist()])
    assert np.array_equal(frames, at(dataset, "frames", rows, envs))


def test_polars_read_and_scan(run: tuple[Dataset, Path, dict[str, Any]]) -> None:
    pl = pytest.importorskip("polars", reason="polars cannot be installed on this Python")
    dataset, path, report = run
    frame = pl.read_parquet(path)
    assert frame.schema["observations"] == pl.Array(pl.Float32, 4)
    assert frame.schema["frames"] == pl.Struct({"bytes": pl.Binary, "path": pl.String})
    assert frame.schema["terminated"] == pl.Boolean
    rows, envs = frame["row"].to_numpy(), frame["env"].to_numpy()
    assert np.array_equal(frame["observations"].to_numpy(), at(dataset, "observations", rows, envs))
    assert np.array_equal(frame["actions"].to_numpy(), at(dataset, "actions", rows, envs))
    cell = frame["frames"].struct.field("bytes")[9]
    assert np.array_equal(png(cell), at(dataset, "frames", rows[9], envs[9]))
    episodes = (
        pl.scan_parquet(path)
        .group_by("episode_index")
        .agg(
            pl.col("rewards").sum().alias("ret"),
            (pl.col("terminated") | pl.col("truncated")).any().alias("done"),
        )
        .filter(pl.col("done"))
        .collect()
    )
    assert episodes.height == report["episodes"]["complete"]
    assert episodes["ret"].mean() == pytest.approx(report["episodes"]["return"]["mean"])


def test_duckdb_sql_over_the_file(run: tuple[Dataset, Path, dict[str, Any]]) -> None:
    duckdb = pytest.importorskip("duckdb", reason="duckdb cannot be installed on this Python")
    dataset, path, report = run
    con = duckdb.connect()
    complete = con.execute(
        "SELECT count(*), avg(ret), min(ret), max(ret), avg(len) FROM ("
        "  SELECT episode_index, sum(rewards) AS ret, count(*) AS len,"
        "         bool_or(terminated OR truncated) AS done"
        "  FROM read_parquet(?) GROUP BY episode_index) WHERE done",
        [str(path)],
    ).fetchone()
    episodes = report["episodes"]
    assert complete[0] == episodes["complete"] > 3
    assert complete[1:4] == pytest.approx([episodes["return"][k] for k in ("mean", "min", "max")])
    assert complete[4] == pytest.approx(episodes["length"]["mean"])
    row, env, frame = con.execute(
        "SELECT row, env, frames.bytes FROM read_parquet(?) WHERE index = 77", [str(path)]
    ).fetchone()
    assert np.array_equal(png(frame), dataset.tensors["frames"][row, env])  # a BLOB: a PNG
    kv = dict(
        con.execute(
            "SELECT decode(key), decode(value) FROM parquet_kv_metadata(?)", [str(path)]
        ).fetchall()
    )
    assert json.loads(kv["expcli"])["env_id"] == "CartPole-v1"


def test_hf_datasets_load_dataset(
    run: tuple[Dataset, Path, dict[str, Any]], tmp_path: Path
) -> None:
    datasets = pytest.importorskip("datasets", reason="datasets cannot be installed here")
    dataset, path, _ = run
    hf = datasets.load_dataset(
        "parquet", data_files=str(path), split="train", cache_dir=str(tmp_path)
    )
    assert hf.num_rows == SIZE * ENVS
    assert hf.features["observations"] == datasets.List(datasets.Value("float32"), length=4)
    assert hf.features["rewards"] == datasets.Value("float32")
    numpy = hf.with_format("numpy")[:]
    rows, envs = numpy["row"], numpy["env"]
    assert np.array_equal(numpy["observations"], at(dataset, "observations", rows, envs))
    assert np.array_equal(numpy["terminated"], at(dataset, "terminated", rows, envs))
    assert hf.features["frames"] == datasets.Image()
    frames = numpy["frames"]  # decoded by HF: arrays equal to expcli's frames
    assert frames.dtype == np.uint8 and frames.shape == (SIZE * ENVS, 42, 42, 3)
    assert np.array_equal(frames, at(dataset, "frames", rows, envs))


@pytest.mark.parametrize(
    ("chosen", "expected"), [(None, "jemalloc"), ("mimalloc", "mimalloc"), ("system", "system")]
)
def test_expcli_reads_arrow_data_with_jemalloc_unless_told(
    chosen: str | None, expected: str
) -> None:
    """mimalloc keeps freed pages per thread, glibc's heaps grow with the shards read; a
    user's ``ARROW_DEFAULT_MEMORY_POOL`` wins, and so does a pyarrow imported before."""
    code = (
        "from expcli.formats.parquet_format import pyarrow_parquet; pyarrow_parquet(); "
        "import pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    )
    pa = pytest.importorskip("pyarrow")
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:  # a wheel without it: the system allocator
        expected = "system" if chosen is None else expected
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == expected
    pools = []  # pyarrow's own pool, then expcli's after a program imported pyarrow first
    for program in ("", "from expcli.formats.parquet_format import pyarrow_parquet as p; p(); "):
        line = f"import pyarrow; {program}print(pyarrow.default_memory_pool().backend_name)"
        ran = subprocess.run(
            [sys.executable, "-c", line], env=env, capture_output=True, text=True, check=True
        )
        pools.append(ran.stdout.strip())
    assert pools[0] == pools[1]
