"""A collected folder of Parquet shards opens unchanged in pyarrow, polars, duckdb, HF
``datasets`` (``load_dataset(FOLDER)``, no other argument) and Ray Data, each giving back the
values expcli holds: episodes counted across shards, returns as ``inspect --json`` says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import expcli
from expcli.replay import RandomSampler, ReplayBuffer
from expcli.replay.storages import DatasetStorage
from expcli.summary import summarize
from expcli.summary.checks import PASSED

pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")

ENVS, STEPS = 3, 1500
EXPCLI = [sys.executable, "-m", "expcli"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
RUN = ["collect", "CartPole-v1", "--envs", str(ENVS), "--steps", str(STEPS), "--seed", "3"]


def cli(*args: str) -> str:
    done = subprocess.run([*EXPCLI, *args], capture_output=True, text=True, env=ENV)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, expcli.Dataset, dict[str, Any]]:
    """A CartPole run in Parquet shards of 40 rows (episodes cross shards), the same run read
    from npz shards, and ``inspect --json`` of the Parquet folder."""
    root = tmp_path_factory.mktemp("pqshards")
    folder, npz = root / "run", root / "npz"
    cli(*RUN, "-o", str(folder), "--shard-size", "40", "--shard-format", "parquet", "-q")
    cli(*RUN, "-o", str(npz), "--shard-size", "40", "-q")
    return folder, expcli.load(npz), json.loads(cli("inspect", str(folder), "--json"))


def glob(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.glob("shard-*.parquet"))


def at(dataset: expcli.Dataset, name: str, rows: Any, envs: Any) -> np.ndarray:
    return np.asarray(dataset.tensors[name])[np.asarray(rows), np.asarray(envs)]


def test_expcli_reads_the_folder_as_it_reads_npz_shards(
    run: tuple[Path, expcli.Dataset, dict[str, Any]],
) -> None:
    folder, reference, report = run
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["shard_format"] == "parquet" and len(manifest["shards"]) > 5
    assert all(s["file"].endswith(".parquet") for s in manifest["shards"])
    loaded = expcli.load(folder)
    for name, want in reference.tensors.items():
        assert np.array_equal(np.asarray(loaded.tensors[name]), want), name
    assert report["transitions"] == STEPS and report["format"] == "folder"
    checks = summarize(folder, check=True).checks or ()
    assert {c.check for c in checks} >= {"shards"} and {c.status for c in checks} == {PASSED}
    batches = []
    for source in (folder, folder.parent / "npz"):  # as ``expcli sample`` draws
        storage = DatasetStorage.open(source)
        batches.append(ReplayBuffer(storage, sampler=RandomSampler(), seed=1).sample(64))
        storage.close()
    assert batches[0].keys() == batches[1].keys()
    for name in batches[0]:
        assert np.array_equal(np.asarray(batches[0][name]), np.asarray(batches[1][name])), name


def test_pyarrow_reads_the_shard_glob(run: tuple[Path, expcli.Dataset, dict[str, Any]]) -> None:
    import pyarrow.parquet as pq

    folder, reference, _ = run
    table = pq.read_table(glob(folder))
    assert np.array_equal(np.sort(table["index"].to_numpy()), np.arange(STEPS))  # across shards
    rows, envs = table["row"].to_numpy(), table["env"].to_numpy()
    obs = table["observations"].combine_chunks().flatten().to_numpy().reshape(-1, 4)
    assert np.array_equal(obs, at(reference, "observations", rows, envs))
    one = pq.ParquetFile(glob(folder)[1]).metadata.metadata
    assert json.loads(one[b"expcli"])["shard"]["first_row"] == 40  # a shard says what it is


def test_polars_and_duckdb_count_episodes_across_shards(
    run: tuple[Path, expcli.Dataset, dict[str, Any]],
) -> None:
    pl = pytest.importorskip("polars", reason="polars cannot be installed on this Python")
    duckdb = pytest.importorskip("duckdb", reason="duckdb cannot be installed on this Python")
    folder, _, report = run
    pattern = str(folder / "shard-*.parquet")
    assert pl.scan_parquet(pattern).select(pl.len()).collect().item() == STEPS
    episodes = report["episodes"]
    complete = (
        duckdb.connect()
        .execute(
            "SELECT count(*), avg(ret), min(ret), max(ret), median(ret) FROM ("
            "  SELECT episode_index, sum(rewards) AS ret,"
            "         bool_or(terminated OR truncated) AS done"
            "  FROM read_parquet(?) GROUP BY episode_index) WHERE done",
            [pattern],
        )
        .fetchone()
    )
    assert complete is not None and complete[0] == episodes["complete"] > 20
    stats = [episodes["return"][k] for k in ("mean", "min", "max", "median")]
    assert list(complete[1:]) == pytest.approx(stats)


def test_hf_datasets_load_dataset_of_the_folder(
    run: tuple[Path, expcli.Dataset, dict[str, Any]], tmp_path: Path
) -> None:
    pytest.importorskip("datasets", reason="datasets cannot be installed on this Python")
    folder, reference, _ = run
    assert "load_dataset(FOLDER)" in (folder / "README.md").read_text()  # the folder's card
    script = (
        "import datasets, json, sys\n"
        "d = datasets.load_dataset(sys.argv[1])\n"
        "t = d['train'].with_format('numpy')[:]\n"
        "print(json.dumps({'splits': list(d), 'columns': d['train'].column_names,\n"
        "  'rows': [int(x) for x in t['row']], 'envs': [int(x) for x in t['env']],\n"
        "  'actions': [int(x) for x in t['actions']], 'obs': t['observations'].tolist()}))\n"
    )
    env = {**ENV, "HF_HOME": str(tmp_path), "HF_DATASETS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["splits"] == ["train"] and len(got["rows"]) == STEPS
    assert got["columns"][:5] == ["index", "episode_index", "frame_index", "env", "row"]
    assert "observations" in got["columns"] and "manifest" not in " ".join(got["columns"])
    rows, envs = got["rows"], got["envs"]
    assert np.array_equal(np.float32(got["obs"]), at(reference, "observations", rows, envs))
    actions = at(reference, "actions", rows, envs).reshape(-1)
    assert np.array_equal(got["actions"], actions)


# Ray Data's own context warns of its own deprecated settings as it starts
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")
def test_ray_data_read_parquet_of_the_folder(
    run: tuple[Path, expcli.Dataset, dict[str, Any]],
) -> None:
    ray = pytest.importorskip("ray", reason="ray cannot be installed on this Python")
    folder, reference, _ = run
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        import pyarrow as pa

        data = ray.data.read_parquet(str(folder))  # the folder as it is: Parquet files only
        table = pa.concat_tables(ray.get(data.to_arrow_refs()))  # one execution: ray is slow
    finally:
        ray.shutdown()
    assert table.num_rows == STEPS
    rows, envs = table["row"].to_numpy(), table["env"].to_numpy()
    obs = table["observations"].combine_chunks().flatten().to_numpy().reshape(-1, 4)
    assert np.array_equal(obs, at(reference, "observations", rows, envs))
