"""The layouts package: names, dispatch, unknown files, and what importing it loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from expcli.errors import ConfigError, OutputExistsError
from expcli.formats import Dataset, read_dataset
from expcli.formats.layouts import LAYOUTS, read_foreign_hdf5, write_layout

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")


def test_layout_names() -> None:
    assert LAYOUTS == ("expcli", "skrl", "tianshou", "minari", "d4rl", "lerobot")


def test_importing_layouts_loads_neither_h5py_nor_torch() -> None:
    code = (
        "import sys, expcli.formats.layouts; "
        "print(sorted(m for m in ('h5py', 'torch') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_unrecognised_hdf5_is_none(tmp_path: Path) -> None:
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as h5:
        h5["weights"] = np.zeros(3)
        h5.create_group("episode_0")
    with h5py.File(path, "r") as h5:
        assert read_foreign_hdf5(h5, path, None) is None
    with h5py.File(path, "w"):
        pass
    with h5py.File(path, "r") as h5:
        assert read_foreign_hdf5(h5, path, None) is None


def test_unknown_layout(tmp_path: Path, dataset: Dataset) -> None:
    with pytest.raises(ConfigError, match="unknown layout 'rllib'"):
        write_layout(dataset, tmp_path / "x.h5", "rllib", overwrite=False)


@pytest.mark.parametrize(
    "layout, name", [("d4rl", "out.h5"), ("tianshou", "out.hdf5"), ("skrl", "out.pt")]
)
def test_existing_file_is_kept_without_overwrite(
    tmp_path: Path, dataset: Dataset, layout: str, name: str
) -> None:
    path = tmp_path / name
    path.write_bytes(b"mine")
    with pytest.raises(OutputExistsError):
        write_layout(dataset, path, layout, overwrite=False)
    assert path.read_bytes() == b"mine"
    write_layout(dataset, path, layout, overwrite=True)
    assert path.read_bytes() != b"mine"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_expcli_layout_is_expcli_format(tmp_path: Path, dataset: Dataset) -> None:
    path = write_layout(dataset, tmp_path / "out.npz", "expcli", overwrite=False)
    back = read_dataset(path)
    assert back.state == dataset.state and back.metadata["env_id"] == "Toy-v0"


def test_read_dataset_hands_foreign_hdf5_to_the_layouts(tmp_path: Path) -> None:
    path = tmp_path / "hopper.hdf5"
    with h5py.File(path, "w") as h5:
        h5["observations"] = np.zeros((4, 3), dtype=np.float32)
        h5["actions"] = np.zeros((4, 2), dtype=np.float32)
        h5["rewards"] = np.ones(4, dtype=np.float32)
        h5["terminals"] = np.array([False, True, False, False])
        h5["timeouts"] = np.zeros(4, dtype=bool)
    dataset = read_dataset(path)
    assert dataset.metadata["layout"] == "d4rl" and dataset.memory_size == 4
