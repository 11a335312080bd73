"""save/load: atomic, schema-following, and a loaded memory is the one saved."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from expcli import FormatError, Memory, RandomMemory, load
from tests.format_catalogue import FILE_FORMATS, SKRL_FORMATS, suffix_of
from tests.memory.conftest import assert_same_tensor

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]


def assert_same_memory(a: Memory, b: Memory) -> None:
    assert a.get_tensor_names() == b.get_tensor_names()
    assert (a.memory_size, a.num_envs, a.memory_index, a.env_index, a.filled, len(a)) == (
        b.memory_size,
        b.num_envs,
        b.memory_index,
        b.env_index,
        b.filled,
        len(b),
    )
    for name in a.get_tensor_names():
        assert_same_tensor(a.tensors[name], b.tensors[name])
    names = list(a.get_tensor_names())
    for length in (1, 2):
        for x, y in zip(
            a.sample_all(names, sequence_length=length)[0],
            b.sample_all(names, sequence_length=length)[0],
            strict=True,
        ):
            assert_same_tensor(x, y)


@st.composite
def memories(draw: st.DrawFn) -> Memory:
    memory_size, num_envs = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    memory = Memory(memory_size, num_envs, "cpu")
    for i in range(draw(st.integers(1, 4))):
        dtype = draw(st.sampled_from(DTYPES))
        feature = draw(hnp.array_shapes(min_dims=1, max_dims=2, max_side=3))
        memory.create_tensor(f"t{i}_{dtype}", feature, getattr(torch, dtype), keep_dimensions=True)
        values = draw(hnp.arrays(np.dtype(dtype), (memory_size, num_envs, *feature)))
        memory.tensors[f"t{i}_{dtype}"].copy_(torch.from_numpy(values))
    writes = draw(st.integers(0, 2 * memory_size * num_envs))
    memory.memory_index, memory.env_index = divmod(writes % (memory_size * num_envs), num_envs)
    memory.filled = writes >= memory_size * num_envs
    memory.metadata = {"env_id": draw(st.text(max_size=8)), "seed": draw(st.integers(0, 9))}
    return memory


@pytest.mark.parametrize("fmt", FILE_FORMATS)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(memory=memories())
def test_save_then_load_gives_the_same_memory(tmp_path: Path, fmt: str, memory: Memory) -> None:
    path = memory.save(tmp_path / f"m{suffix_of(fmt)}")
    assert path == str(tmp_path / f"m{suffix_of(fmt)}")
    loaded = Memory(1, device="cpu")
    loaded.load(path)
    assert_same_memory(memory, loaded)
    assert loaded.metadata["env_id"] == memory.metadata["env_id"]
    assert_same_memory(memory, RandomMemory.from_file(path, device="cpu"))


def filled_memory() -> RandomMemory:
    m = RandomMemory(6, 3, "cpu")
    m.create_tensor("observations", 4, torch.float32)
    m.create_tensor("actions", 1, torch.int64)
    for t in range(8):
        m.add_samples(observations=np.full((3, 4), t, np.float32), actions=np.full((3, 1), t))
    m.add_samples(observations=np.ones((1, 4), np.float32))
    return m


@pytest.mark.parametrize("fmt", SKRL_FORMATS)
def test_skrl_style_save_into_a_directory(tmp_path: Path, fmt: str) -> None:
    m = filled_memory()
    path = Path(m.save(str(tmp_path), fmt))
    assert path.parent == tmp_path / "memories" and path.suffix == f".{fmt}"
    assert path.name.endswith(f"_memory_{hex(id(m))}.{fmt}")
    assert_same_memory(m, Memory.from_file(path, device="cpu"))
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


def test_save_to_a_file_path_makes_its_folder(tmp_path: Path) -> None:
    m = filled_memory()
    path = m.save(tmp_path / "a" / "b" / "run.csv")
    assert Path(path).is_file() and Path(path + ".meta.json").is_file()


def test_save_defaults_to_pt_and_the_export_directory(tmp_path: Path) -> None:
    m = Memory(2, export_directory=str(tmp_path), device="cpu")
    m.create_tensor("x", 1)
    assert Path(m.save()).suffix == ".pt"


def test_file_follows_the_dataset_schema(tmp_path: Path) -> None:
    m = filled_memory()
    m.metadata["env_id"] = "CartPole-v1"
    dataset = load(m.save(tmp_path / "x.npz"))
    assert (dataset.state.memory_index, dataset.state.env_index, dataset.state.filled) == (
        m.memory_index,
        m.env_index,
        m.filled,
    )
    assert dataset.metadata["env_id"] == "CartPole-v1"
    with np.load(tmp_path / "x.npz", allow_pickle=False) as raw:
        assert raw["observations"].shape == (6, 3, 4)
        assert '"schema": "expcli/1"' in str(raw["__expcli__"])


def test_unknown_format_and_conflicting_suffix(tmp_path: Path) -> None:
    m = filled_memory()
    with pytest.raises(ValueError, match="Unsupported"):
        m.save(str(tmp_path), "json")
    with pytest.raises(ValueError, match="contradicts"):
        m.save(tmp_path / "a.npz", "pt")


def test_save_is_atomic_when_writing_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = filled_memory()
    target = tmp_path / "run.npz"
    m.save(target)
    before = target.read_bytes()

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("expcli.formats.npz_format._write_member", disk_full)
    m.add_samples(observations=np.zeros((2, 4), np.float32))
    with pytest.raises(OSError):
        m.save(target)
    assert target.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["run.npz"]


class _Exploit:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, ("touch pwned",))


def test_load_never_unpickles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    evil = tmp_path / "evil.pt"
    torch.save({"observations": torch.zeros(2, 1, 1), "payload": _Exploit()}, evil)
    with pytest.raises(FormatError):
        Memory(2, device="cpu").load(evil)
    assert not (tmp_path / "pwned").exists()
    np.savez(tmp_path / "evil.npz", x=np.array([_Exploit()], dtype=object))
    with pytest.raises(FormatError):
        Memory(2, device="cpu").load(tmp_path / "evil.npz")
    assert not (tmp_path / "pwned").exists()
    assert pickle  # the exploit is a real pickle payload


def test_load_reads_skrl_exports(tmp_path: Path) -> None:
    skrl = pytest.importorskip("skrl.memories.torch")
    ref = skrl.RandomMemory(memory_size=4, num_envs=2, device="cpu")
    ref.create_tensor("observations", size=3, dtype=torch.float32)
    ref.create_tensor("terminated", size=1, dtype=torch.bool)
    for t in range(4):
        ref.add_samples(
            observations=torch.full((2, 3), float(t)), terminated=torch.ones(2, 1, dtype=torch.bool)
        )
    for fmt in SKRL_FORMATS:
        ref.save(str(tmp_path / fmt), format=fmt)
        [path] = (tmp_path / fmt / "memories").iterdir()
        m = Memory(4, 2, device="cpu")
        m.load(path)
        assert m.filled and len(m) == 8
        assert torch.equal(m.tensors["observations"], ref.tensors["observations"])
        assert torch.equal(m.tensors["terminated"].bool(), ref.tensors["terminated"])


def test_memory_misuse_is_an_expcli_error_and_still_a_value_or_type_error() -> None:
    from expcli.errors import ExpcliError, InvalidTypeError, InvalidValueError

    with pytest.raises(InvalidValueError) as info:
        RandomMemory(0, device="cpu")
    assert isinstance(info.value, ValueError) and isinstance(info.value, ExpcliError)
    assert str(info.value) == "memory_size must be a positive integer, got 0"
    memory = RandomMemory(4, device="cpu")
    memory.create_tensor("x", 1, torch.float32)
    with pytest.raises(InvalidTypeError) as typed:
        memory.sample_by_index(["x"], np.array([0.5]))
    assert isinstance(typed.value, TypeError)
