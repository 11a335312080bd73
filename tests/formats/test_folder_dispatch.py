"""File or Minari folder: decided by the registry, so every reader takes a folder.

Before, only ``expcli.load`` and ``summarize`` opened a Minari folder (each with its own
check), ``read_dataset`` and ``open_lazy`` failed on one with an ``IsADirectoryError``,
and a missing path was a ``FileNotFoundError`` to some callers and a ``FormatError`` to
others. The reference is the Minari layout's own folder reader.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from expcli import RandomMemory, ReplayBuffer, load, save, summarize
from expcli.errors import FormatError, SourceNotFoundError
from expcli.formats import MINARI_FOLDER, open_lazy, read_dataset, source_format
from expcli.formats.dataset import Dataset
from expcli.formats.layouts.minari.layout import read_folder as read_minari_folder
from expcli.spec import CircularState


@pytest.fixture(scope="module")
def minari_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    terminated = np.zeros((8, 1, 1), bool)
    terminated[3] = terminated[7] = True
    dataset = Dataset(
        {
            "observations": rng.normal(size=(8, 1, 2)).astype(np.float32),
            "next_observations": rng.normal(size=(8, 1, 2)).astype(np.float32),
            "actions": rng.integers(0, 3, (8, 1, 1)),
            "rewards": rng.normal(size=(8, 1, 1)).astype(np.float32),
            "terminated": terminated,
            "truncated": np.zeros((8, 1, 1), bool),
        },
        CircularState(0, 0, True),
    )
    return save(dataset, tmp_path_factory.mktemp("minari") / "run-v0", layout="minari")


def _same_tensors(a: Dataset, b: Dataset) -> None:
    assert sorted(a.tensors) == sorted(b.tensors) and a.state == b.state
    for name, x in a.tensors.items():
        y = np.asarray(b.tensors[name])
        assert x.dtype == y.dtype and np.array_equal(x, y), name


def test_every_reader_opens_a_minari_folder(minari_folder: Path) -> None:
    reference = read_minari_folder(minari_folder)
    assert source_format(minari_folder) == MINARI_FOLDER
    _same_tensors(reference, read_dataset(minari_folder))
    _same_tensors(reference, load(minari_folder))
    lazy, close = open_lazy(minari_folder)
    try:
        _same_tensors(reference, lazy)
    finally:
        close()
    memory = RandomMemory.from_file(minari_folder, device="cpu")
    assert np.array_equal(memory.tensors["actions"].numpy(), reference.tensors["actions"])
    assert ReplayBuffer(minari_folder, seed=0).sample(4)["actions"].shape == (4, 1)


def test_a_folder_that_is_not_minari_says_so(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="not a Minari dataset folder"):
        read_dataset(tmp_path)


@pytest.mark.parametrize(
    "reader",
    [read_dataset, open_lazy, load, summarize, ReplayBuffer, RandomMemory.from_file],
    ids=["read_dataset", "open_lazy", "load", "summarize", "ReplayBuffer", "from_file"],
)
def test_a_missing_source_is_one_error_with_one_message(tmp_path: Path, reader: object) -> None:
    missing = tmp_path / "missing.h5"
    with pytest.raises(SourceNotFoundError) as info:
        reader(missing)  # type: ignore[operator]
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, FormatError)
    assert str(info.value) == f"{missing}: no such file or folder"
