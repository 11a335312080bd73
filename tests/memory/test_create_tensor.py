"""create_tensor, names, get/set by name, devices and the constructor."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

from expcli import Memory, RandomMemory


def test_constructor_positional_and_keyword_styles_agree() -> None:
    a = Memory(10, 4, "cpu", False, "npz", "out")
    b = Memory(
        memory_size=10,
        num_envs=4,
        device="cpu",
        export=False,
        export_format="npz",
        export_directory="out",
    )
    for m in (a, b):
        assert (m.memory_size, m.num_envs, m.device) == (10, 4, torch.device("cpu"))
        assert (m.export, m.export_format, m.export_directory) == (False, "npz", "out")
        assert (m.memory_index, m.env_index, m.filled, len(m)) == (0, 0, False, 0)


def test_constructor_defaults() -> None:
    m = Memory(3)
    assert m.num_envs == 1 and m.export is False and m.export_format == "pt"
    assert m.export_directory == "" and m.get_sampling_indexes() is None


@pytest.mark.parametrize("fmt", ["np", "json", "h5", ""])
def test_unsupported_export_format_raises(fmt: str) -> None:
    with pytest.raises(ValueError, match="Unsupported export format"):
        Memory(3, export_format=fmt)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"memory_size": 0},
        {"memory_size": 3, "num_envs": 0},
        {"memory_size": 2.5},
        {"memory_size": True},
    ],
)
def test_bad_sizes_raise(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        Memory(**kwargs)  # type: ignore[arg-type]


def test_device_none_means_cuda_when_available(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Memory(2).device == torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert Memory(2).device == torch.device("cuda:0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert Memory(2).device == torch.device("cpu")


SIZES = [
    (5, False, (5,)),
    ((2, 3), False, (6,)),
    ([2, 3], True, (2, 3)),
    ((4,), True, (4,)),
    (spaces.Discrete(7), False, (1,)),
    (spaces.Discrete(7), True, (1,)),
    (spaces.Box(-1, 1, (3, 2)), False, (6,)),
    (spaces.Box(-1, 1, (3, 2)), True, (3, 2)),
    (spaces.MultiDiscrete([3, 4, 5]), False, (3,)),
    (spaces.MultiDiscrete([3, 4, 5]), True, (3,)),
    (spaces.MultiBinary(6), False, (6,)),
    (spaces.MultiBinary([2, 3]), True, (2, 3)),
    (spaces.Dict({"a": spaces.Box(0, 1, (2,)), "b": spaces.Discrete(3)}), False, (3,)),
    (spaces.Tuple((spaces.MultiDiscrete([2, 2]), spaces.Box(0, 1, (2, 2)))), False, (6,)),
]


@pytest.mark.parametrize(("size", "keep", "feature"), SIZES, ids=[repr(s[0])[:40] for s in SIZES])
def test_create_tensor_shapes(size: object, keep: bool, feature: tuple[int, ...]) -> None:
    m = Memory(4, 3, "cpu")
    assert m.create_tensor("x", size, keep_dimensions=keep) is True
    tensor = m.get_tensor_by_name("x")
    assert tuple(tensor.shape) == (4, 3, *feature)
    assert m.get_tensor_by_name("x", keepdim=False).shape == (12, *feature)
    assert m._tensor_x is tensor  # type: ignore[attr-defined]  # skrl's attribute
    assert tensor.dtype == torch.get_default_dtype()


@pytest.mark.parametrize(
    "space", [spaces.Dict({"a": spaces.Discrete(2)}), spaces.Tuple((spaces.Discrete(2),))]
)
def test_keep_dimensions_refuses_composite_spaces(space: spaces.Space[object]) -> None:
    with pytest.raises(ValueError, match="composite"):
        Memory(2).create_tensor("x", space, keep_dimensions=True)


@pytest.mark.parametrize("size", [0, -1, (2, 0), "4", 1.5, True])
def test_bad_sizes_for_tensors(size: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        Memory(2, device="cpu").create_tensor("x", size)


def test_create_tensor_none_size_creates_nothing() -> None:
    m = Memory(2, device="cpu")
    assert m.create_tensor("x", None) is False
    assert m.get_tensor_names() == []


def test_float_tensors_start_as_nan_and_others_as_zero() -> None:
    m = Memory(2, 2, "cpu")
    m.create_tensor("f", 2, torch.float16)
    m.create_tensor("i", 2, torch.int32)
    m.create_tensor("b", 1, torch.bool)
    assert torch.isnan(m.tensors["f"]).all()
    assert not m.tensors["i"].any() and not m.tensors["b"].any()
    assert m.tensors["f"].dtype == torch.float16 and m.tensors["b"].dtype == torch.bool


def test_numpy_dtypes_are_accepted() -> None:
    m = Memory(2, device="cpu")
    m.create_tensor("a", 1, np.int16)
    m.create_tensor("b", 1, "uint8")
    assert (m.tensors["a"].dtype, m.tensors["b"].dtype) == (torch.int16, torch.uint8)


def test_recreation_returns_false_or_raises_on_conflict() -> None:
    m = Memory(2, 2, "cpu")
    assert m.create_tensor("x", 3, torch.float32)
    assert m.create_tensor("x", 3) is False
    assert m.create_tensor("x", (3,), torch.float32) is False
    with pytest.raises(ValueError, match="size"):
        m.create_tensor("x", 4)
    with pytest.raises(ValueError, match="dtype"):
        m.create_tensor("x", 3, torch.int64)
    with pytest.raises(ValueError, match="size"):
        m.create_tensor("x", (3, 1), keep_dimensions=True)


def test_tensor_names_are_a_sorted_list_as_skrls() -> None:
    skrl_memories = pytest.importorskip("skrl.memories.torch")
    m = Memory(2, device="cpu")
    ref = skrl_memories.RandomMemory(memory_size=2, num_envs=1, device="cpu")
    for name in ["rewards", "actions", "observations", "Zeta", "next_observations"]:
        m.create_tensor(name, 1)
        ref.create_tensor(name, size=1)
    names = m.get_tensor_names()
    assert type(names) is type(ref.get_tensor_names()) is list
    assert names == ref.get_tensor_names()
    names.append("mine")  # a new list each call: the caller's to change
    assert "mine" not in m.get_tensor_names()


def test_get_and_set_tensor_by_name() -> None:
    m = Memory(3, 2, "cpu")
    m.create_tensor("x", 2)
    m.set_tensor_by_name("x", torch.arange(12.0).view(3, 2, 2))
    assert torch.equal(m.get_tensor_by_name("x").flatten(), torch.arange(12.0))
    m.set_tensor_by_name("x", np.zeros((3, 2, 2)))
    assert not m.get_tensor_by_name("x").any()
    with pytest.raises(KeyError):
        m.get_tensor_by_name("missing")
    with pytest.raises(KeyError):
        m.set_tensor_by_name("missing", torch.zeros(1))


def test_base_sample_is_abstract() -> None:
    m = Memory(3, device="cpu")
    m.create_tensor("x", 1)
    m.add_samples(x=np.ones(1))
    with pytest.raises(NotImplementedError):
        m.sample(["x"], 1)


def test_random_memory_defaults_to_replacement() -> None:
    assert RandomMemory(4)._replacement is True
    assert RandomMemory(4, 1, "cpu", False, "pt", "", False)._replacement is False


def test_share_memory_keeps_writes_visible() -> None:
    m = Memory(4, 2, "cpu")
    m.create_tensor("x", 3)
    m.share_memory()
    assert m.tensors["x"].is_shared()
    m.add_samples(x=np.ones((2, 3)))
    assert m.tensors["x"][0].eq(1).all()
    assert m.get_tensor_by_name("x", keepdim=False)[:2].eq(1).all()
    assert math.isnan(m.tensors["x"][1, 0, 0].item())
