"""tianshou's ``save_hdf5`` files, made with tianshou itself, and files tianshou loads."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from expcli.errors import FormatError, SchemaError
from expcli.formats import Dataset
from expcli.formats.layouts import SEAMS_KEY, read_foreign_hdf5, write_layout
from expcli.formats.layouts._episodes import column_rows
from expcli.spec import CircularState
from tests.formats.layouts.sample import CHRONOLOGICAL, N, T, make_dataset

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")

data = pytest.importorskip("tianshou.data")


def step(value: float, *, end: bool = False, cut: bool = False, envs: int = 0) -> Any:
    """One transition (or one per env when ``envs``) whose values all derive from ``value``."""
    count = envs or 1
    obs = np.tile(np.array([value, -value], dtype=np.float32), (count, 1))
    batch = data.Batch(
        obs=obs,
        act=np.full(count, int(value) % 3),
        rew=np.full(count, value / 4),
        terminated=np.full(count, end),
        truncated=np.full(count, cut),
        obs_next=obs + 0.5,
        info={"lives": np.full(count, int(value))},
    )
    return batch if envs else batch[0]


def read(path: Path) -> Dataset:
    with h5py.File(path, "r") as h5:
        dataset = read_foreign_hdf5(h5, path, None)
    assert dataset is not None
    return dataset


def column(dataset: Dataset, name: str, j: int = 0) -> list[Any]:
    """A tensor's valid values of one env column, oldest first (first feature only)."""
    rows = column_rows(dataset)[j]
    return [v.tolist() for v in dataset.tensors[name][rows, j, 0]]


def saved(buffer: Any, path: Path) -> Path:
    buffer.save_hdf5(str(path))
    return path


def test_wrapped_replay_buffer_keeps_its_circular_state(tmp_path: Path) -> None:
    buffer = data.ReplayBuffer(5)
    for i in range(8):
        buffer.add(step(i, end=i in (2, 6), cut=i == 4))
    dataset = read(saved(buffer, tmp_path / "rb.h5"))
    assert dataset.state == CircularState(3, 0, True)
    assert (dataset.memory_size, dataset.num_envs) == (5, 1)
    assert np.array_equal(dataset.tensors["observations"][:, 0], buffer.obs)
    assert column(dataset, "observations") == [3.0, 4.0, 5.0, 6.0, 7.0]
    assert column(dataset, "next_observations") == [3.5, 4.5, 5.5, 6.5, 7.5]
    assert column(dataset, "rewards") == [0.75, 1.0, 1.25, 1.5, 1.75]
    assert column(dataset, "actions") == [0, 1, 2, 0, 1]
    assert column(dataset, "terminated") == [False, False, False, True, False]
    assert column(dataset, "truncated") == [False, True, False, False, False]
    assert column(dataset, "infos/lives") == [3, 4, 5, 6, 7]
    assert dataset.metadata == {
        "layout": "tianshou",
        "tianshou": {"buffer": "ReplayBuffer", "maxsize": 5},
    }


def test_partly_filled_replay_buffer(tmp_path: Path) -> None:
    buffer = data.ReplayBuffer(10)
    for i in range(4):
        buffer.add(step(i, end=i == 1))
    dataset = read(saved(buffer, tmp_path / "rb.h5"))
    assert dataset.state == CircularState(4, 0, False) and len(dataset) == 4
    assert column(dataset, "observations") == [0.0, 1.0, 2.0, 3.0]


def test_buffer_without_obs_next_derives_it_as_tianshou_does(tmp_path: Path) -> None:
    buffer = data.ReplayBuffer(6, ignore_obs_next=True)
    for i in range(5):
        buffer.add(step(i, end=i == 1))
    dataset = read(saved(buffer, tmp_path / "rb.h5"))
    assert dataset.metadata["tianshou"]["derived"] == ["next_observations"]
    derived = column(dataset, "next_observations")
    # tianshou's own answer: obs[buffer.next(index)]
    assert derived == buffer.obs[buffer.next(np.arange(5)), 0].tolist() == [1, 1, 3, 4, 4]


def test_vector_buffer_in_step_maps_to_one_column_per_env(tmp_path: Path) -> None:
    buffer = data.VectorReplayBuffer(8, 2)
    for i in range(6):
        buffer.add(step(i, end=i == 2, envs=2))
    dataset = read(saved(buffer, tmp_path / "vrb.h5"))
    assert (dataset.memory_size, dataset.num_envs) == (4, 2)
    assert dataset.state == CircularState(2, 0, True)
    for j in range(2):
        assert column(dataset, "observations", j) == [2.0, 3.0, 4.0, 5.0]
        assert column(dataset, "terminated", j) == [True, False, False, False]
    assert dataset.metadata["tianshou"] == {
        "buffer": "VectorReplayBuffer",
        "maxsize": 8,
        "buffer_num": 2,
    }


def test_vector_buffer_one_env_ahead_uses_env_index(tmp_path: Path) -> None:
    buffer = data.VectorReplayBuffer(8, 2)
    for i in range(2):
        buffer.add(step(i, envs=2))
    buffer.add(step(10, envs=1), buffer_ids=[0])
    dataset = read(saved(buffer, tmp_path / "vrb.h5"))
    assert dataset.state == CircularState(2, 1, False) and len(dataset) == 5
    assert column(dataset, "observations", 0) == [0.0, 1.0, 10.0]
    assert column(dataset, "observations", 1) == [0.0, 1.0]


def test_vector_buffer_with_one_sub_buffer_just_full(tmp_path: Path) -> None:
    buffer = data.VectorReplayBuffer(6, 2)
    for i in range(2):
        buffer.add(step(i, envs=2))
    buffer.add(step(10, envs=1), buffer_ids=[0])
    dataset = read(saved(buffer, tmp_path / "vrb.h5"))
    assert dataset.state == CircularState(2, 1, False)
    assert column(dataset, "observations", 0) == [0.0, 1.0, 10.0]
    assert column(dataset, "observations", 1) == [0.0, 1.0]


def test_vector_buffer_full_but_out_of_step_is_rotated(tmp_path: Path) -> None:
    buffer = data.VectorReplayBuffer(6, 2)
    for i in range(5):
        buffer.add(step(i, envs=1), buffer_ids=[0])
    for i in range(3):
        buffer.add(step(20 + i, envs=1), buffer_ids=[1])
    dataset = read(saved(buffer, tmp_path / "vrb.h5"))
    assert dataset.state == CircularState(0, 0, True)
    assert column(dataset, "observations", 0) == [2.0, 3.0, 4.0]
    assert column(dataset, "observations", 1) == [20.0, 21.0, 22.0]


def test_vector_buffer_of_uneven_fill_is_concatenated_with_seams(tmp_path: Path) -> None:
    buffer = data.VectorReplayBuffer(8, 2)
    for i in range(3):
        buffer.add(step(i, envs=1), buffer_ids=[0])
    buffer.add(step(20, envs=1), buffer_ids=[1])
    dataset = read(saved(buffer, tmp_path / "vrb.h5"))
    assert (dataset.memory_size, dataset.num_envs) == (4, 1)
    assert column(dataset, "observations") == [0.0, 1.0, 2.0, 20.0]
    assert column(dataset, "truncated") == [False, False, True, False]
    assert dataset.metadata[SEAMS_KEY] == [2]


def test_pickled_parts_are_never_unpickled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = data.VectorReplayBuffer(4, 2)  # saves ``buffers`` and ``_random_state`` pickled
    buffer.add(step(1, envs=2))
    path = saved(buffer, tmp_path / "vrb.h5")

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("unpickled")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    assert column(read(path), "observations", 1) == [1.0]


def test_pickled_info_is_skipped_and_named(tmp_path: Path) -> None:
    buffer = data.ReplayBuffer(3)
    for i in range(2):
        batch = step(i)
        batch.info.name = np.array("text")  # strings are pickled by save_hdf5
        buffer.add(batch)
    path = saved(buffer, tmp_path / "rb.h5")
    with h5py.File(path, "r") as h5:
        assert h5["_meta/info/name"].attrs["__data_type__"] == "pickled_ndarray"
    dataset = read(path)
    assert dataset.metadata["tianshou"]["skipped"] == ["_meta/info/name"]
    assert "infos/lives" in dataset.tensors


def test_pickled_standard_data_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    path = saved(fill(data.ReplayBuffer(3), 2), tmp_path / "rb.h5")
    with h5py.File(path, "a") as h5:
        del h5["_meta/obs"]
        payload = pickle.dumps(Exploit(marker))
        h5["_meta/obs"] = np.frombuffer(payload, dtype=np.byte)
        h5["_meta/obs"].attrs["__data_type__"] = "pickled_ndarray"
    with pytest.raises(FormatError) as info:
        read(path)
    assert info.value.key == "_meta/obs" and "never unpickles" in str(info.value)
    assert not marker.exists()


def test_rows_that_disagree_with_maxsize_are_named(tmp_path: Path) -> None:
    path = saved(fill(data.ReplayBuffer(3), 2), tmp_path / "rb.h5")
    with h5py.File(path, "a") as h5:
        del h5["_meta/rew"]
        h5["_meta/rew"] = np.zeros(2)
        h5["_meta/rew"].attrs["__data_type__"] = "ndarray"
    with pytest.raises(SchemaError) as info:
        read(path)
    assert info.value.key == "_meta/rew" and info.value.path == str(path)


def test_written_single_column_loads_in_tianshou_with_its_state(tmp_path: Path) -> None:
    dataset = make_dataset(CircularState(4, 0, False))
    dataset.tensors = {k: v[:, :1] for k, v in dataset.tensors.items()}
    path = write_layout(dataset, tmp_path / "ts.hdf5", "tianshou", overwrite=False)
    buffer = data.ReplayBuffer.load_hdf5(str(path))
    assert (buffer.maxsize, len(buffer), buffer._insertion_idx) == (T, 4, 4)
    assert np.array_equal(buffer.obs, dataset.tensors["observations"][:, 0])
    assert np.array_equal(buffer.obs_next, dataset.tensors["next_observations"][:, 0])
    assert buffer.act.shape == (T,) and buffer.rew.dtype == np.float64
    assert np.array_equal(buffer.info.lives, dataset.tensors["infos/lives"][:, 0, 0])
    assert np.array_equal(buffer.policy.log_prob, dataset.tensors["log_prob"][:, 0, 0])
    batch, indices = buffer.sample(0)
    assert sorted(indices.tolist()) == [0, 1, 2, 3]
    obs = np.full(3, 9, dtype=np.float32)
    buffer.add(  # tianshou carries on where expcli stopped
        data.Batch(
            obs=obs,
            act=1,
            rew=1.0,
            terminated=False,
            truncated=False,
            obs_next=obs,
            info={"lives": 1},
            policy={"log_prob": 0.0},
        )
    )
    assert buffer.obs[4, 0] == 9 and len(buffer) == 5


def test_written_columns_load_in_tianshou_env_by_env(tmp_path: Path) -> None:
    dataset = make_dataset()
    path = write_layout(dataset, tmp_path / "ts.hdf5", "tianshou", overwrite=False)
    buffer = data.ReplayBuffer.load_hdf5(str(path))
    rows = np.array(CHRONOLOGICAL[0] + CHRONOLOGICAL[1])
    envs = np.repeat(np.arange(N), T)
    assert len(buffer) == buffer.maxsize == N * T
    assert np.array_equal(buffer.obs, dataset.tensors["observations"][rows, envs])
    assert np.flatnonzero(buffer.terminated).tolist() == [1, 4, 7]
    assert np.flatnonzero(buffer.truncated).tolist() == [5, 9]  # 5: the seam between columns
    assert np.array_equal(buffer.done, buffer.terminated | buffer.truncated)
    # tianshou finds the episodes: the one cut at the seam does not run into column 1
    assert buffer.next(np.array([5]))[0] == 5


def test_round_trip_through_tianshou_layout(tmp_path: Path) -> None:
    buffer = fill(data.ReplayBuffer(5), 8)
    dataset = read(saved(buffer, tmp_path / "rb.h5"))
    write_layout(dataset, tmp_path / "again.h5", "tianshou", overwrite=False)
    back = read(tmp_path / "again.h5")
    assert back.state == dataset.state
    for name, array in dataset.tensors.items():
        assert np.array_equal(back.tensors[name], array), name


def fill(buffer: Any, count: int) -> Any:
    for i in range(count):
        buffer.add(step(i, end=i % 3 == 2))
    return buffer


class Exploit:
    """A pickle that creates a marker file when loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


@pytest.mark.parametrize("seed", range(12))
def test_any_vector_buffer_fill_keeps_each_sub_buffer_in_order(tmp_path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    count, size = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    buffer = data.VectorReplayBuffer(count * size, count)
    added: list[list[float]] = [[] for _ in range(count)]
    for i in range(int(rng.integers(0, 4 * size * count))):
        ids = sorted(rng.choice(count, size=int(rng.integers(1, count + 1)), replace=False))
        batch = step(i, envs=len(ids), end=bool(rng.random() < 0.3))
        buffer.add(batch, buffer_ids=ids)
        for j in ids:
            added[j].append(float(i))
    if not any(added):
        return
    dataset = read(saved(buffer, tmp_path / "vrb.h5"))
    kept = [values[-size:] for values in added]
    if dataset.num_envs == count:
        for j in range(count):
            assert column(dataset, "observations", j) == kept[j]
    else:  # no circular state fits: sub-buffers one after the other
        assert column(dataset, "observations") == [v for values in kept for v in values]
