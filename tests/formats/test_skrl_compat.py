"""Files that skrl 2.x's ``Memory.save`` writes (pt, npz, csv) read back with their values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from expcli.formats import Dataset, read_dataset, write_dataset
from expcli.spec import CircularState
from tests.format_catalogue import SKRL_EVERY_ROW, SKRL_FORMATS

skrl_memories = pytest.importorskip("skrl.memories.torch")

SIZES = {"observations": 4, "actions": 2, "rewards": 1, "terminated": 1, "log_prob": 1}
DTYPES = {
    "observations": torch.float32,
    "actions": torch.int64,
    "rewards": torch.float32,
    "terminated": torch.bool,
    "log_prob": torch.float64,
}


def samples(count: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    return {
        "observations": torch.randn(count, 4, generator=generator),
        "actions": torch.randint(-5, 5, (count, 2), generator=generator),
        "rewards": torch.randn(count, 1, generator=generator),
        "terminated": torch.rand(count, 1, generator=generator) < 0.3,
        "log_prob": torch.randn(count, 1, generator=generator, dtype=torch.float64),
    }


def skrl_memory(memory_size: int, num_envs: int, steps: int, partial: int = 0, **kw: Any) -> Any:
    """A skrl RandomMemory after ``steps`` full rows and ``partial`` single-env samples."""
    memory = skrl_memories.RandomMemory(
        memory_size=memory_size, num_envs=num_envs, device="cpu", **kw
    )
    for name, size in SIZES.items():
        memory.create_tensor(name, size=size, dtype=DTYPES[name])
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        memory.add_samples(**samples(num_envs, generator))
    for _ in range(partial):
        memory.add_samples(**samples(1, generator))
    return memory


def saved(memory: Any, folder: Path, fmt: str) -> Path:
    memory.save(str(folder), format=fmt)
    [path] = (folder / "memories").iterdir()
    return path


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("fmt", SKRL_FORMATS)
def test_full_skrl_memory(tmp_path: Path, fmt: str) -> None:
    memory = skrl_memory(5, 3, steps=5)
    assert memory.filled and len(memory) == 15
    dataset = read_dataset(saved(memory, tmp_path, fmt), num_envs=3)
    assert sorted(dataset.tensors) == sorted(SIZES)
    for name in SIZES:
        assert same_bits(dataset.tensors[name], memory.tensors[name].numpy()), name
    assert dataset.state == CircularState(0, 0, True)
    assert dataset.metadata == {}


@pytest.mark.parametrize("fmt", SKRL_EVERY_ROW)
def test_partly_filled_skrl_memory_reports_only_the_written_rows(tmp_path: Path, fmt: str) -> None:
    memory = skrl_memory(5, 3, steps=2, partial=1)
    dataset = read_dataset(saved(memory, tmp_path, fmt))
    for name in SIZES:  # every stored row kept: unwritten float rows are skrl's NaN
        assert same_bits(dataset.tensors[name], memory.tensors[name].numpy()), name
    assert len(dataset) == len(memory) == 7
    assert dataset.state == CircularState(2, 1, False)  # 2 rows of 3 envs, then 1 env
    assert dataset.metadata == {"layout": "skrl", "skrl": {"unwritten_transitions": 8}}


@pytest.mark.parametrize("fmt", SKRL_EVERY_ROW)
def test_partial_skrl_export_loads_and_samples_only_written_rows(tmp_path: Path, fmt: str) -> None:
    """The issue's case: memory_size=64, 4 envs, 40 rows written, saved by skrl itself."""
    from expcli import load
    from expcli.replay import ReplayBuffer

    memory = skrl_memory(64, 4, steps=40)
    dataset = load(saved(memory, tmp_path, fmt))
    assert len(dataset) == 160 and dataset.state == CircularState(40, 0, False)
    assert dataset.metadata["skrl"] == {"unwritten_transitions": 96}
    batch = ReplayBuffer(dataset, seed=0).sample(512)
    assert not torch.isnan(batch["rewards"]).any()
    assert not torch.isnan(batch["observations"]).any()


def test_a_full_skrl_memory_whose_last_rows_hold_data_is_full(tmp_path: Path) -> None:
    memory = skrl_memory(4, 2, steps=4)
    memory.tensors["rewards"][-1] = float("nan")  # NaN rewards, but the rest is data
    dataset = read_dataset(saved(memory, tmp_path, "pt"))
    assert dataset.state == CircularState(0, 0, True) and dataset.metadata == {}


def test_partly_filled_skrl_csv(tmp_path: Path) -> None:
    memory = skrl_memory(5, 3, steps=2, partial=1)
    assert len(memory) == 7
    path = saved(memory, tmp_path, "csv")
    dataset = read_dataset(path, num_envs=3)
    assert (dataset.memory_size, dataset.num_envs, len(dataset)) == (3, 3, 7)
    assert dataset.state == CircularState(2, 1, False)
    for name in SIZES:
        flat = dataset.tensors[name].reshape(9, -1)
        assert same_bits(flat[:7], memory.tensors_view[name][:7].numpy()), name
        if flat.dtype.kind == "f":
            assert np.isnan(flat[7:]).all()
    one_column = read_dataset(path)
    assert (one_column.memory_size, one_column.num_envs, len(one_column)) == (7, 1, 7)
    assert one_column.state == CircularState(0, 0, True)


def test_skrl_csv_dtype_inference(tmp_path: Path) -> None:
    memory = skrl_memory(2, 2, steps=2)
    dataset = read_dataset(saved(memory, tmp_path, "csv"), num_envs=2)
    assert {name: array.dtype.name for name, array in dataset.tensors.items()} == {
        "actions": "int64",
        "log_prob": "float64",  # float64 values that float32 cannot hold
        "observations": "float32",
        "rewards": "float32",
        "terminated": "bool",
    }


@pytest.mark.parametrize("fmt", SKRL_FORMATS)
def test_skrl_automatic_export_when_full(tmp_path: Path, fmt: str) -> None:
    memory = skrl_memory(
        3, 2, steps=3, export=True, export_format=fmt, export_directory=str(tmp_path)
    )
    [path] = (tmp_path / "memories").iterdir()
    dataset = read_dataset(path, num_envs=2)
    for name in SIZES:
        assert same_bits(dataset.tensors[name], memory.tensors[name].numpy()), name


def test_skrl_loads_what_expcli_writes_as_pt(tmp_path: Path) -> None:
    memory = skrl_memory(4, 2, steps=4)
    dataset = Dataset({name: memory.tensors[name].numpy() for name in SIZES})
    path = write_dataset(dataset, tmp_path / "ours.pt")
    other = skrl_memory(4, 2, steps=0)
    other.load(str(path))
    for name in SIZES:
        assert torch.equal(getattr(other, f"_tensor_{name}"), memory.tensors[name])
