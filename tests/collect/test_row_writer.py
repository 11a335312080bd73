"""RowWriter: columns that skip steps are realigned; complete rows only, in order, none lost."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.collect.row_writer import RowWriter
from expcli.memory import RandomMemory
from expcli.spec import chronological_rows


def _memory(rows: int, envs: int) -> RandomMemory:
    memory = RandomMemory(rows, envs, device="cpu")
    memory.create_tensor("x", 2, torch.float32)
    memory.create_tensor("k", 1, torch.int64)
    return memory


def _reference(valid: np.ndarray) -> list[list[int]]:
    """Per column, the step numbers of its transitions, in order."""
    return [[int(t) for t in np.flatnonzero(valid[:, j])] for j in range(valid.shape[1])]


@settings(max_examples=60, deadline=None)
@given(
    envs=st.integers(1, 5),
    data=st.data(),
    block=st.sampled_from([1, 2, 3, 8, 64]),
)
def test_committed_rows_are_each_columns_own_sequence(
    envs: int, data: st.DataObject, block: int
) -> None:
    steps = data.draw(st.integers(1, 120))
    valid = np.array(
        data.draw(
            st.lists(
                st.lists(st.booleans(), min_size=envs, max_size=envs),
                min_size=steps,
                max_size=steps,
            )
        ),
        dtype=bool,
    )
    all_valid_steps = data.draw(st.booleans())
    memory = _memory(200, envs)
    committed: list[np.ndarray] = []
    writer = RowWriter(memory, lambda rows: committed.append(rows["k"].copy()), block=block)
    for t in range(steps):
        k = np.full((envs, 1), t, dtype=np.int64)
        x = np.stack([np.full(2, t * 10 + j, np.float32) for j in range(envs)])
        mask = None if all_valid_steps and valid[t].all() else valid[t]
        if writer.write({"x": x, "k": k}, mask):
            committed.append(k[None])
    writer.flush()
    expected = _reference(valid if not all_valid_steps else valid)
    rows = min(len(column) for column in expected)
    assert writer.committed_rows == rows == memory.memory_index
    k = memory.get_tensor_by_name("k").numpy()[:rows, :, 0]
    x = memory.get_tensor_by_name("x").numpy()[:rows]
    for j in range(envs):
        assert k[:, j].tolist() == expected[j][:rows]
        assert (x[:, j, 0] == k[:, j] * 10 + j).all()
    assert writer.staged == sum(len(c) for c in expected) - rows * envs
    assert sum(len(c) for c in committed) == rows


@settings(max_examples=60, deadline=None)
@given(envs=st.integers(1, 4), size=st.integers(1, 9), data=st.data())
def test_a_small_memory_keeps_the_newest_complete_rows(
    envs: int, size: int, data: st.DataObject
) -> None:
    steps = data.draw(st.integers(1, 80))
    valid = np.array(
        data.draw(
            st.lists(
                st.lists(st.booleans(), min_size=envs, max_size=envs),
                min_size=steps,
                max_size=steps,
            )
        ),
        dtype=bool,
    )
    memory = _memory(size, envs)
    writer = RowWriter(memory, lambda rows: None, block=data.draw(st.sampled_from([1, 4, 64])))
    for t in range(steps):
        writer.write({"x": np.zeros((envs, 2), np.float32), "k": np.full((envs, 1), t)}, valid[t])
    writer.flush()
    expected = _reference(valid)
    rows = min(len(column) for column in expected)
    kept = min(rows, size)
    order = chronological_rows(memory.state, size, envs)
    k = memory.get_tensor_by_name("k").numpy()[..., 0]
    assert len(memory) == kept * envs
    for j in range(envs):
        assert k[order[j, :kept], j].tolist() == expected[j][rows - kept : rows]


def test_wraps_and_limits() -> None:
    memory = _memory(4, 2)
    writer = RowWriter(memory, lambda rows: None, limit_rows=6)
    for t in range(10):
        writer.write({"x": np.full((2, 2), t, np.float32), "k": np.full((2, 1), t)})
    assert writer.full and writer.committed_rows == 6
    assert memory.filled and memory.memory_index == 2
    assert memory.get_tensor_by_name("k").numpy()[:, 0, 0].tolist() == [4, 5, 2, 3]


def test_grows_instead_of_wrapping() -> None:
    memory = _memory(2, 3)
    writer = RowWriter(memory, lambda rows: None, grow=True)
    for t in range(9):
        mask = np.array([True, t % 3 != 0, True])
        writer.write({"x": np.full((3, 2), t, np.float32), "k": np.full((3, 1), t)}, mask)
    writer.flush()
    assert not memory.filled and memory.memory_size >= 6
    assert memory.memory_index == writer.committed_rows == 6
    k = memory.get_tensor_by_name("k").numpy()[:6, :, 0]
    assert k[:, 0].tolist() == [0, 1, 2, 3, 4, 5]
    assert k[:, 1].tolist() == [1, 2, 4, 5, 7, 8]


def test_refuses_a_partly_written_row() -> None:
    memory = _memory(4, 2)
    memory.add_samples(x=np.zeros(2, np.float32), k=np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="partly written"):
        RowWriter(memory, lambda rows: None)


def test_a_block_longer_than_the_memory_keeps_its_last_rows() -> None:
    memory = _memory(3, 2)
    writer = RowWriter(memory, lambda rows: None, block=16)
    for t in range(11):
        writer.write(
            {"x": np.full((2, 2), t, np.float32), "k": np.full((2, 1), t)}, np.array([True, t > 0])
        )
    writer.flush()
    assert writer.committed_rows == 10 and memory.filled and memory.memory_index == 1
    k = memory.get_tensor_by_name("k").numpy()[..., 0]
    assert k[:, 0].tolist() == [9, 7, 8] and k[:, 1].tolist() == [10, 8, 9]
