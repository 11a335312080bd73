"""Foreign layouts read lazily (``open_lazy``: rows left in the file, reordered a slice at a
time) give the same tensors, bit for bit, as reading them whole; files made by tianshou,
and D4RL files split into env columns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from expcli.formats import Dataset, hdf5_format
from expcli.formats.layouts import read_foreign_hdf5
from expcli.formats.lazy import LazyRows
from tests.formats.layouts.test_tianshou import data, saved, step


def wrapped() -> Any:
    buffer = data.ReplayBuffer(5)
    for i in range(8):
        buffer.add(step(i, end=i in (2, 6), cut=i == 4))
    return buffer


def without_obs_next() -> Any:
    buffer = data.ReplayBuffer(6, ignore_obs_next=True)
    for i in range(9):
        buffer.add(step(i, end=i == 3))
    return buffer


def vector(fill: Callable[[Any], None], size: int = 8) -> Callable[[], Any]:
    def make() -> Any:
        buffer = data.VectorReplayBuffer(size, 2)
        fill(buffer)
        return buffer

    return make


def in_step(buffer: Any) -> None:
    for i in range(7):
        buffer.add(step(i, envs=2, end=i == 2))


def out_of_step(buffer: Any) -> None:
    for i in range(5):
        buffer.add(step(i, envs=1), buffer_ids=[0])
    for i in range(3):
        buffer.add(step(20 + i, envs=1), buffer_ids=[1])


def uneven(buffer: Any) -> None:
    for i in range(3):
        buffer.add(step(i, envs=1), buffer_ids=[0])
    buffer.add(step(20, envs=1), buffer_ids=[1])


BUFFERS = {
    "wrapped": wrapped,
    "no-obs-next": without_obs_next,
    "vector-in-step": vector(in_step),
    "vector-rotated": vector(out_of_step, 6),
    "vector-concatenated": vector(uneven),
}


def assert_same(eager: Dataset, lazy: Dataset) -> None:
    assert lazy.state == eager.state
    assert lazy.metadata == eager.metadata
    assert sorted(lazy.tensors) == sorted(eager.tensors)
    rng = np.random.default_rng(0)
    for name, array in eager.tensors.items():
        got = lazy.tensors[name]
        whole = np.asarray(got)
        assert (whole.dtype, whole.shape) == (array.dtype, array.shape), name
        assert whole.tobytes() == array.tobytes(), name
        rows = rng.integers(0, len(array), 7)
        assert np.asarray(got[rows]).tobytes() == array[rows].tobytes(), name
        assert np.asarray(got[1:3]).tobytes() == array[1:3].tobytes(), name


@pytest.mark.parametrize("kind", sorted(BUFFERS))
def test_tianshou_read_lazily_equals_read_whole(tmp_path: Path, kind: str) -> None:
    path = saved(BUFFERS[kind](), tmp_path / "buffer.h5")
    with h5py.File(path, "r") as h5:
        eager = read_foreign_hdf5(h5, path, None)
    assert eager is not None
    lazy, close = hdf5_format.open_lazy(
        path, foreign=hdf5_format.ForeignLayouts(read_foreign_hdf5, "")
    )
    try:
        assert any(isinstance(t, LazyRows) for t in lazy.tensors.values())
        assert_same(eager, lazy)
    finally:
        close()


def d4rl_file(path: Path, next_observations: bool) -> Path:
    """12 rows: episodes end at rows 2, 5 (a timeout) and 9, across the env columns' seams."""
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as h5:
        h5["observations"] = rng.random((12, 2, 2), dtype=np.float32)
        h5["actions"] = rng.integers(0, 4, 12)
        h5["rewards"] = rng.random(12)
        h5["terminals"] = np.isin(np.arange(12), [2, 9])
        h5["timeouts"] = np.arange(12) == 5
        h5["infos/qpos"] = rng.random((12, 3))
        if next_observations:
            h5["next_observations"] = rng.random((12, 2, 2), dtype=np.float32)
    return path


@pytest.mark.parametrize("num_envs", [1, 2, 3, 4])
@pytest.mark.parametrize("next_observations", [False, True])
def test_d4rl_read_lazily_equals_read_whole(
    tmp_path: Path, num_envs: int, next_observations: bool
) -> None:
    path = d4rl_file(tmp_path / "d.hdf5", next_observations)
    with h5py.File(path, "r") as h5:
        eager = read_foreign_hdf5(h5, path, num_envs)
    assert eager is not None
    lazy, close = hdf5_format.open_lazy(
        path, num_envs=num_envs, foreign=hdf5_format.ForeignLayouts(read_foreign_hdf5, "")
    )
    try:
        for name in ("observations", "next_observations", "actions", "rewards"):
            assert isinstance(lazy.tensors[name], LazyRows), name
        assert lazy.num_envs == num_envs
        assert_same(eager, lazy)
    finally:
        close()
