"""``load`` refuses, before reading, what memory cannot hold whole; mapped tensors cost none.

The memory available is simulated (``host_memory.available_bytes``); that nothing was read
is shown by counting the reads of a folder's shards, and by tensors that fail when read.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import ConfigError, Memory, host_memory, load
from expcli.cli import app
from expcli.formats import Dataset, hdf5_format, read_dataset, sharded, write_dataset
from expcli.formats.layouts import write_layout
from expcli.formats.lazy import LazyRows
from expcli.spec import CircularState
from tests.formats.layouts.sample import make_dataset
from tests.formats.test_roundtrip import assert_same_dataset

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")


def _frames(rows: int = 64) -> Dataset:
    rng = np.random.default_rng(3)
    tensors = {
        "observations": rng.integers(0, 255, (rows, 2, 32, 32), dtype=np.uint8),
        "rewards": rng.random((rows, 2, 1)).astype(np.float32),
    }
    return Dataset(tensors, CircularState(0, 0, True), {"env_id": "Pong"})


def _nbytes(dataset: Dataset) -> int:
    return sum(a.nbytes for a in dataset.tensors.values())


def _limit(monkeypatch: pytest.MonkeyPatch, available: int) -> None:
    monkeypatch.setattr(host_memory, "available_bytes", lambda: available)


def _refused(read: Callable[[], Any], path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        read()
    message = str(caught.value)
    assert caught.value.path == str(path) and message.startswith(f"{path}: ")
    assert "expcli.formats.open_lazy(path)" in message and "ReplayBuffer(path)" in message
    assert "\n" not in message
    return message


def test_a_folder_too_large_is_refused_before_any_shard_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = _frames()
    folder = tmp_path / "run"
    sharded.write(dataset, folder, overwrite=False, shard_bytes=20_000)  # 8 shards
    fetched: list[int] = []
    member = sharded._ShardMaps.member

    def counted(self: Any, shard: int, name: str) -> Any:
        fetched.append(shard)
        return member(self, shard, name)

    monkeypatch.setattr(sharded._ShardMaps, "member", counted)
    needed = _nbytes(dataset)
    _limit(monkeypatch, needed - 1)
    for read in (lambda: load(folder), lambda: Memory.from_file(folder, device="cpu")):
        message = _refused(read, folder)
        assert "needs about 131.6 kB, more than the 131.6 kB of memory available" in message
    assert fetched == []
    _limit(monkeypatch, needed)  # just enough: read whole, every shard
    assert_same_dataset(dataset, load(folder))
    assert sorted(set(fetched)) == list(range(8))


def _write_sources(tmp_path: Path, dataset: Dataset) -> dict[str, Path]:
    """The dataset in every storage that ``load`` reads whole."""
    paths = {
        "h5": write_dataset(dataset, tmp_path / "a.h5"),
        "csv": write_dataset(dataset, tmp_path / "a.csv"),
        "parquet": write_dataset(dataset, tmp_path / "a.parquet"),
        "parquet shards": write_dataset(dataset, tmp_path / "pq", shard_format="parquet"),
        "deflated npz": tmp_path / "deflated.npz",
    }
    np.savez_compressed(paths["deflated npz"], **dataset.tensors)  # a skrl export, deflated
    for layout, name in (("minari", "toy-v0"), ("d4rl", "d4rl.h5")):
        write_layout(dataset, tmp_path / name, layout, overwrite=False)
        paths[layout] = tmp_path / name
    return paths


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")
    return _write_sources(tmp_path_factory.mktemp("sources"), make_dataset())


@pytest.mark.parametrize(
    "kind", ["h5", "csv", "parquet", "parquet shards", "deflated npz", "minari", "d4rl"]
)
def test_every_storage_read_whole_is_refused_before_its_tensors_are_read(
    sources: dict[str, Path], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sources[kind]
    whole = read_dataset(path)  # read with the machine's memory: what the limit is under

    def no_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("a tensor was read before the memory was checked")

    monkeypatch.setattr(LazyRows, "__array__", no_read)
    monkeypatch.setattr(hdf5_format, "read_dataset_rows", no_read)
    _limit(monkeypatch, _nbytes(whole) // 2)
    _refused(lambda: load(path), path)


@pytest.mark.parametrize("suffix", [".npz", ".pt"])
def test_a_mapped_file_larger_than_the_memory_available_is_loaded(
    tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = _frames(1024)  # 2 MB
    path = write_dataset(dataset, tmp_path / f"a{suffix}")
    load(path)  # once first: torch's imports are not the read's
    _limit(monkeypatch, _nbytes(dataset) - 1)  # as a folder of these rows is refused
    tracemalloc.start()
    try:
        loaded = load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_same_dataset(dataset, loaded)
    assert peak < _nbytes(dataset) / 4  # mapped, not read


def test_a_legacy_pt_file_is_read_whole_and_refused_in_one_cli_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "legacy.pt"
    tensors = {name: torch.from_numpy(a) for name, a in _frames().tensors.items()}
    torch.save(tensors, path, _use_new_zipfile_serialization=False)  # never mapped
    _limit(monkeypatch, path.stat().st_size - 1)
    result = CliRunner().invoke(app, ["inspect", str(path)])
    assert result.exit_code == ConfigError.exit_code == 2, result.output
    line, *more = result.stderr.strip().splitlines()
    assert more == [] and line.startswith(f"error: {path}: reading it whole needs about")
    assert "torch's zip format" in line


@pytest.mark.parametrize("how", ["from_file", "load"])
def test_a_mapped_file_too_large_for_a_memory_is_refused_before_it_is_copied(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from expcli import RandomMemory

    dataset = _frames(256)
    path = write_dataset(dataset, tmp_path / "a.npz")
    _limit(monkeypatch, _nbytes(dataset) - 1)  # mapped: load is fine, a Memory's copy is not
    load(path)
    with pytest.raises(ConfigError, match=r"copying it into a Memory needs about .*ReplayBuffer"):
        if how == "from_file":
            RandomMemory.from_file(path, device="cpu")
        else:
            RandomMemory(4, 2, "cpu").load(path)
    _limit(monkeypatch, _nbytes(dataset))
    assert RandomMemory.from_file(path, device="cpu").memory_size == dataset.memory_size
