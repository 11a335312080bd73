"""The skrl layout: files as skrl's ``Memory.save`` writes them, loaded by skrl."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from expcli.formats import Dataset, read_dataset
from expcli.formats.layouts import write_layout
from expcli.spec import CircularState
from tests.format_catalogue import SKRL_FORMATS, suffix_of
from tests.formats.layouts.sample import N, T, make_dataset

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")

skrl_memories = pytest.importorskip("skrl.memories.torch")


def flat(array: np.ndarray) -> np.ndarray:
    return array.reshape(*array.shape[:2], -1)


def test_pt_loads_with_skrl_memory_load(tmp_path: Path, dataset: Dataset) -> None:
    path = write_layout(dataset, tmp_path / "memory.pt", "skrl", overwrite=False)
    memory = skrl_memories.RandomMemory(memory_size=T, num_envs=N, device="cpu")
    for name, array in dataset.tensors.items():
        memory.create_tensor(name, size=int(np.prod(array.shape[2:])))
    memory.load(str(path))
    for name, array in dataset.tensors.items():
        # skrl's load rebinds the ``_tensor_<name>`` attributes
        loaded = getattr(memory, f"_tensor_{name}").numpy()
        assert loaded.dtype == array.dtype and np.array_equal(loaded, flat(array)), name


@pytest.mark.parametrize("fmt", SKRL_FORMATS)
def test_expcli_reads_the_skrl_files_back(tmp_path: Path, fmt: str) -> None:
    dataset = make_dataset(CircularState(4, 1, False))
    path = write_layout(dataset, tmp_path / f"memory{suffix_of(fmt)}", "skrl", overwrite=False)
    back = read_dataset(path, num_envs=N)
    assert back.metadata == {}  # skrl files carry no metadata
    assert sorted(back.tensors) == sorted(dataset.tensors)
    if fmt == "csv":  # only the valid transitions, in (row, env) order, as skrl writes
        assert back.state == CircularState(4, 1, False) and back.memory_size == 5
        valid = 4 * N + 1
        for name, array in dataset.tensors.items():
            got = back.tensors[name].reshape(5 * N, -1)[:valid]
            assert np.array_equal(got, flat(array).reshape(T * N, -1)[:valid]), name
    else:  # every row, whatever the fill, as skrl saves it
        assert back.state == CircularState(0, 0, True)
        for name, array in dataset.tensors.items():
            assert np.array_equal(back.tensors[name], flat(array)), name
