"""add_samples: the three cases, the errors, wrap-around, inputs, and skrl as the reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli import Memory, RandomMemory
from tests.memory.conftest import assert_same_tensor

skrl_memories = pytest.importorskip("skrl.memories.torch")


def make(memory_size: int = 4, num_envs: int = 3) -> Memory:
    m = Memory(memory_size, num_envs, "cpu")
    m.create_tensor("observations", 2, torch.float32)
    m.create_tensor("actions", 1, torch.int64)
    return m


def test_full_rows_advance_memory_index() -> None:
    m = make()
    m.add_samples(observations=np.ones((3, 2)), actions=np.full((3, 1), 7))
    assert (m.memory_index, m.env_index, len(m)) == (1, 0, 3)
    assert m.tensors["observations"][0].eq(1).all() and m.tensors["actions"][0].eq(7).all()
    assert torch.isnan(m.tensors["observations"][1:]).all()


def test_fewer_envs_advance_env_index_then_row() -> None:
    m = make()
    m.add_samples(observations=np.full((2, 2), 5.0))
    assert (m.memory_index, m.env_index, len(m)) == (0, 2, 2)
    m.add_samples(observations=np.full((1, 2), 6.0))
    assert (m.memory_index, m.env_index, len(m)) == (1, 0, 3)
    assert m.tensors["observations"][0, :, 0].tolist() == [5.0, 5.0, 6.0]


def test_one_env_sample_without_batch_dimension() -> None:
    m = make()
    for value in range(4):
        m.add_samples(observations=np.full(2, float(value)), actions=np.array([value]))
    assert (m.memory_index, m.env_index, len(m)) == (1, 1, 4)
    assert m.tensors["actions"][:2, :, 0].tolist() == [[0, 1, 2], [3, 0, 0]]


def test_wraps_and_marks_filled() -> None:
    m = make(memory_size=2, num_envs=1)
    for value in range(5):
        m.add_samples(observations=np.full((1, 2), float(value)))
        assert m.filled == (value >= 1)
    assert m.memory_index == 1 and len(m) == 2
    assert m.tensors["observations"][:, 0, 0].tolist() == [4.0, 3.0]


def test_single_env_memory_takes_many_rows_at_once_and_wraps() -> None:
    m = Memory(4, 1, "cpu")
    m.create_tensor("x", 1, torch.int64)
    m.add_samples(x=np.arange(3)[:, None])
    assert (m.memory_index, m.filled) == (3, False)
    m.add_samples(x=np.arange(3, 6)[:, None])
    assert (m.memory_index, m.filled, len(m)) == (2, True, 4)
    assert m.tensors["x"][:, 0, 0].tolist() == [4, 5, 2, 3]
    m.add_samples(x=np.arange(6, 15)[:, None])  # more than the memory holds: last 4 kept
    assert m.memory_index == (2 + 9) % 4
    assert sorted(m.tensors["x"][:, 0, 0].tolist()) == [11, 12, 13, 14]
    assert m.tensors["x"][m.memory_index - 1, 0, 0].item() == 14


def test_torch_and_numpy_inputs_write_the_same() -> None:
    a, b = make(), make()
    obs = np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32)
    a.add_samples(observations=obs, actions=np.arange(3)[:, None])
    b.add_samples(
        observations=torch.from_numpy(obs).requires_grad_(), actions=torch.arange(3)[:, None]
    )
    for name in a.tensors:
        assert_same_tensor(a.tensors[name], b.tensors[name])


def test_lists_and_casting_are_accepted() -> None:
    m = make()
    m.add_samples(observations=[[1, 2], [3, 4], [5, 6]], actions=np.array([[1.9], [2.0], [3.0]]))
    assert m.tensors["observations"].dtype == torch.float32
    assert m.tensors["actions"][0, :, 0].tolist() == [1, 2, 3]


def test_flat_rewards_and_unflattened_observations_are_reshaped() -> None:
    m = Memory(3, 2, "cpu")
    m.create_tensor("observations", (2, 2))  # flattened to 4
    m.create_tensor("rewards", 1)
    m.add_samples(observations=np.arange(8.0).reshape(2, 2, 2), rewards=np.array([1.0, 2.0]))
    assert m.tensors["observations"][0].tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert m.tensors["rewards"][0, :, 0].tolist() == [1.0, 2.0]


def test_unknown_names_and_none_values_are_skipped() -> None:
    m = make()
    m.add_samples(observations=np.ones((3, 2)), unknown=np.ones((3, 9)), actions=None)
    assert len(m) == 3 and m.tensors["actions"].eq(0).all()


def test_no_samples_raise() -> None:
    with pytest.raises(ValueError, match="no samples"):
        make().add_samples()
    with pytest.raises(ValueError, match="no samples"):
        make().add_samples(observations=None)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"observations": np.ones((3, 5))},  # wrong feature size
        {"observations": np.ones((4, 2))},  # more envs than num_envs
        {"observations": np.ones((3, 2)), "actions": np.ones((2, 1))},  # disagreeing counts
        {"observations": np.ones((3, 2, 2, 2))},  # too many dimensions
        {"observations": np.ones(())},
    ],
)
def test_incompatible_shapes_raise_and_write_nothing(kwargs: dict[str, np.ndarray]) -> None:
    m = make()
    m.add_samples(observations=np.zeros((3, 2)), actions=np.zeros((3, 1)))
    before = {k: v.clone() for k, v in m.tensors.items()}
    with pytest.raises(ValueError):
        m.add_samples(**kwargs)
    assert (m.memory_index, m.env_index) == (1, 0)
    for name, tensor in m.tensors.items():
        assert_same_tensor(before[name], tensor)


def test_partial_rows_cannot_overflow() -> None:
    m = make()
    m.add_samples(observations=np.ones((2, 2)))
    with pytest.raises(ValueError, match="free env slots"):
        m.add_samples(observations=np.ones((2, 2)))
    with pytest.raises(ValueError, match="free env slots"):
        m.add_samples(observations=np.ones((3, 2)))


def test_writes_go_through_numpy_not_torch_indexing(monkeypatch: pytest.MonkeyPatch) -> None:
    m = make()

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("torch indexing used")

    monkeypatch.setattr(torch.Tensor, "__setitem__", forbidden)
    monkeypatch.setattr(torch.Tensor, "copy_", forbidden)
    m.add_samples(observations=torch.ones((3, 2)), actions=np.ones((3, 1)))
    m.add_samples(observations=np.ones((1, 2)), actions=torch.ones((1, 1)))
    m.add_samples(observations=np.ones(2))
    assert len(m) == 5


def test_export_when_filled(tmp_path) -> None:  # type: ignore[no-untyped-def]
    m = Memory(2, 2, "cpu", export=True, export_format="npz", export_directory=str(tmp_path))
    m.create_tensor("x", 1)
    m.add_samples(x=np.zeros((2, 1)))
    assert not (tmp_path / "memories").exists()
    m.add_samples(x=np.ones((2, 1)))
    files = list((tmp_path / "memories").iterdir())
    assert len(files) == 1 and files[0].suffix == ".npz"
    loaded = Memory.from_file(files[0])
    assert loaded.tensors["x"][:, :, 0].tolist() == [[0, 0], [1, 1]] and loaded.filled
    m.add_samples(x=np.ones((2, 1)))
    m.add_samples(x=np.ones((2, 1)))
    assert len(list((tmp_path / "memories").iterdir())) == 2


# ---------------------------------------------------------------- differential vs skrl


@st.composite
def call_plans(draw: st.DrawFn) -> tuple[int, int, list[int]]:
    """A memory size, a number of envs and a valid sequence of sample counts (-1: 1-D)."""
    memory_size = draw(st.integers(1, 6))
    num_envs = draw(st.integers(1, 5))
    plan: list[int] = []
    env_index = 0
    for _ in range(draw(st.integers(0, 30))):
        free = num_envs - env_index
        n = draw(st.sampled_from([-1, *range(1, free + 1)]))
        if n == num_envs and env_index:
            n = free
        plan.append(n)
        env_index = (env_index + abs(n)) % num_envs
    return memory_size, num_envs, plan


@settings(max_examples=60, deadline=None)
@given(call_plans(), st.integers(0, 2**31 - 1))
def test_add_samples_matches_skrl(plan: tuple[int, int, list[int]], seed: int) -> None:
    memory_size, num_envs, counts = plan
    ours = Memory(memory_size, num_envs, "cpu")
    ref = skrl_memories.RandomMemory(memory_size=memory_size, num_envs=num_envs, device="cpu")
    for memory in (ours, ref):
        memory.create_tensor("observations", size=3, dtype=torch.float32)
        memory.create_tensor("actions", size=1, dtype=torch.int64)
        memory.create_tensor("terminated", size=1, dtype=torch.bool)
    rng = np.random.default_rng(seed)
    for n in counts:
        shape = (abs(n),) if n > 0 else ()
        obs = torch.from_numpy(rng.normal(size=(*shape, 3)).astype(np.float32))
        act = torch.from_numpy(rng.integers(0, 9, size=(*shape, 1)))
        done = torch.from_numpy(rng.random((*shape, 1)) < 0.5)
        ours.add_samples(observations=obs.numpy(), actions=act, terminated=done.numpy())
        ref.add_samples(observations=obs, actions=act, terminated=done)
        assert (ours.memory_index, ours.env_index, ours.filled, len(ours)) == (
            ref.memory_index,
            ref.env_index,
            ref.filled,
            len(ref),
        )
    for name in ref.tensors:
        assert_same_tensor(ours.tensors[name], ref.tensors[name])


def test_random_memory_is_a_memory() -> None:
    assert issubclass(RandomMemory, Memory)
