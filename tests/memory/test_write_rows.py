"""write_row, write_rows and grow: the memory's own write head, against add_samples row by row."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli import load
from expcli.memory import Memory, RandomMemory
from expcli.replay.storages import MemoryStorage
from tests.memory.conftest import assert_same_tensor


def _memory(size: int, envs: int, export_to: str | None = None) -> Memory:
    memory = Memory(
        size,
        envs,
        "cpu",
        export=export_to is not None,
        export_format="npz",
        export_directory=export_to or "",
    )
    memory.create_tensor("x", 2, torch.float32)
    memory.create_tensor("k", 1, torch.int64)
    memory.create_tensor("terminated", 1, torch.bool)
    return memory


def _rows(start: int, count: int, envs: int) -> dict[str, np.ndarray]:
    t = np.arange(start, start + count)[:, None, None]
    env = np.arange(envs)[None, :, None]
    return {
        "x": np.concatenate([t + 0 * env, 10 * env + 0 * t], axis=-1).astype(np.float32),
        "k": (t * envs + env).astype(np.int64),
        "terminated": ((t + env) % 3 == 0),
    }


def _exports(folder: str) -> list[dict[str, np.ndarray]]:
    paths = sorted(Path(folder, "memories").glob("*.npz"))
    return [{k: np.asarray(v) for k, v in load(p).tensors.items()} for p in paths]


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(1, 6),
    envs=st.integers(1, 3),
    blocks=st.lists(st.integers(0, 14), min_size=1, max_size=6),
)
def test_write_rows_is_add_samples_row_by_row(size: int, envs: int, blocks: list[int]) -> None:
    with tempfile.TemporaryDirectory() as a_dir, tempfile.TemporaryDirectory() as b_dir:
        a, b = _memory(size, envs, a_dir), _memory(size, envs, b_dir)
        start = 0
        for count in blocks:
            rows = _rows(start, count, envs)
            a.write_rows(rows)
            for r in range(count):
                b.add_samples(**{name: value[r] for name, value in rows.items()})
            start += count
        assert a.revision[1:] == b.revision[1:]  # laps, head, filled
        assert a.revision[1] == start // size
        for name in a.tensors:
            assert_same_tensor(a.tensors[name], b.tensors[name])
        exports_a, exports_b = _exports(a_dir), _exports(b_dir)
        assert len(exports_a) == len(exports_b) == start // size
        for got, want in zip(exports_a, exports_b, strict=True):
            for name in want:
                np.testing.assert_array_equal(got[name], want[name])


def test_write_row_takes_the_same_path_as_add_samples() -> None:
    a, b = _memory(3, 2), _memory(3, 2)
    for t in range(7):
        row = {name: value[0] for name, value in _rows(t, 1, 2).items()}
        a.write_row(row)
        b.add_samples(**row)
    assert a.revision[1:] == b.revision[1:] == (2, 1, 0, True)
    for name in a.tensors:
        assert_same_tensor(a.tensors[name], b.tensors[name])
    # torch tensors and other shapes go through write_rows' conversions and checks
    a.write_row({"k": torch.zeros(2, 1, dtype=torch.int64)})
    a.write_row({"k": [[7], [8]]})
    assert a.memory_index == 0 and a.tensors["k"][2, :, 0].tolist() == [7, 8]
    with pytest.raises(ValueError, match=r"'k' has shape \(1, 3, 1\)"):
        a.write_row({"k": np.zeros((3, 1), np.int64)})
    assert a.memory_index == 0


def test_write_rows_refuses_what_does_not_fit() -> None:
    m = _memory(4, 2)
    with pytest.raises(ValueError, match="no tensor named 'y'"):
        m.write_rows({"y": np.zeros((1, 2, 1))})
    with pytest.raises(ValueError, match=r"expected \(3, 2, 1\)"):
        m.write_rows({"x": np.zeros((3, 2, 2)), "k": np.zeros((2, 2, 1))})
    assert m.memory_index == 0 and np.isnan(m.tensors["x"].numpy()).all()
    m.add_samples(k=np.zeros(1, np.int64))  # one env of the row
    with pytest.raises(ValueError, match="partly written"):
        m.write_rows(_rows(0, 1, 2))


def test_write_rows_keeps_the_episode_report_running() -> None:
    a, b = _memory(5, 2), _memory(5, 2)
    a.report_episodes()
    b.report_episodes()
    rows = _rows(0, 6, 2)
    a.write_rows(rows)
    for r in range(6):
        b.add_samples(**{name: value[r] for name, value in rows.items()})
    last = {name: value[0] for name, value in _rows(6, 1, 2).items()}
    got, want = a.add_samples(**last), b.add_samples(**last)
    assert got is not None and want is not None
    for field in ("index", "returns", "lengths", "starts"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))


def test_written_since_sees_every_row_a_write_rows_lap_overwrote() -> None:
    memory = _memory(10, 2)
    storage = MemoryStorage(memory)
    memory.write_rows(_rows(0, 15, 2))
    seen = storage.revision()
    memory.write_rows(_rows(15, 10, 2))  # one whole lap: every slot rewritten
    written = storage.written_since(seen)
    assert written is None or set(written.tolist()) == set(range(20))
    seen = storage.revision()
    memory.write_rows(_rows(25, 7, 2))  # rows 5..9, then 0..1
    written = storage.written_since(seen)
    assert written is not None
    assert sorted(written.tolist()) == [*range(4), *range(10, 20)]


@pytest.mark.parametrize("wrapped", [False, True])
def test_grow_keeps_the_data_in_chronological_order(wrapped: bool) -> None:
    memory = _memory(4, 2)
    written = 6 if wrapped else 3
    memory.write_rows(_rows(0, written, 2))
    epoch = memory.revision[0]
    memory.grow(8)
    assert memory.memory_size == 8 and memory.tensors["k"].shape == (8, 2, 1)
    assert memory.revision[0] == epoch + 1 and not memory.filled
    kept = min(written, 4)
    assert memory.memory_index == kept and len(memory) == kept * 2
    k = memory.tensors["k"].numpy()[:, :, 0]
    np.testing.assert_array_equal(k[:kept], _rows(written - kept, kept, 2)["k"][..., 0])
    assert (k[kept:] == 0).all() and np.isnan(memory.tensors["x"].numpy()[kept:]).all()
    memory.write_rows(_rows(written, 3, 2))  # goes on after the kept rows
    assert memory.memory_index == kept + 3 and not memory.filled


def test_grow_refusals() -> None:
    memory = RandomMemory(3, 2, device="cpu")
    memory.create_tensor("k", 1, torch.int64)
    with pytest.raises(ValueError, match="shrink"):
        memory.grow(2)
    memory.grow(3)
    assert memory.memory_size == 3
    for _ in range(3):
        memory.add_samples(k=np.zeros((2, 1), np.int64))
    memory.add_samples(k=np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="partly written"):
        memory.grow(6)
