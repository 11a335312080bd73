"""A CPU memory's small tensors, packed one record per transition, act as separate tensors.

The reference is the same memory with packing off (``conftest.unpacked``): every write
(``add_samples``, ``write_rows``, in place through references held since the tensor was
made, ``set_tensor_by_name``), ``grow``, ``reset``, ``swap_tensors``, pickling, sample and
file must give the same bits.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from expcli import save
from expcli.memory import Memory, RandomMemory
from expcli.memory.records import ROW_BYTES
from tests.format_catalogue import SUFFIXES
from tests.memory.conftest import assert_same_tensor, unpacked

# name -> (size, dtype, keep_dimensions)
SPECS: dict[str, tuple[Any, torch.dtype, bool]] = {
    "observations": ((2, 3), torch.float32, True),
    "actions": (1, torch.int64, False),
    "rewards": (1, torch.float16, False),
    "terminated": (1, torch.bool, False),
    "frames": (ROW_BYTES // 8 + 1, torch.float64, False),  # a row too big: not packed
    "lives": (1, torch.bfloat16, False),  # numpy has no bfloat16: not packed
}
PACKED = {"observations", "actions", "rewards", "terminated"}


def values(name: str, lead: tuple[int, ...], seed: int) -> Any:
    """Random values of tensor ``name`` shaped ``(*lead, *feature)``: numpy, or torch."""
    size, dtype, keep = SPECS[name]
    shape = (*lead, *(size if keep else (size,)))
    rng = np.random.default_rng(seed)
    if dtype == torch.bool:
        return rng.random(shape) < 0.5
    if dtype == torch.int64:
        return rng.integers(-(2**40), 2**40, shape)
    if dtype == torch.bfloat16:
        return torch.from_numpy(rng.normal(size=shape).astype(np.float32)).to(dtype)
    return rng.normal(size=shape).astype(torch.empty(0, dtype=dtype).numpy().dtype)


class Pair:
    """A packed memory and its unpacked reference, with the references users hold."""

    def __init__(self, rows: int, envs: int) -> None:
        self.packed = RandomMemory(rows, envs, "cpu")
        self.plain = RandomMemory(rows, envs, "cpu")
        self.held: dict[int, dict[str, tuple[torch.Tensor, ...]]] = {}

    def both(self, op: Callable[[RandomMemory], Any]) -> list[Any]:
        out = [op(self.packed)]
        with unpacked():
            out.append(op(self.plain))
        return out

    def hold(self, *names: str) -> None:
        """Take the references skrl-style code keeps: tensor, flat view, attribute."""
        for memory in (self.packed, self.plain):
            held = self.held.setdefault(id(memory), {})
            for name in names or memory.tensors:
                held[name] = (
                    memory.tensors[name],
                    memory.tensors_view[name],
                    getattr(memory, f"_tensor_{name}"),
                )

    def check(self, seed: int) -> None:
        packed, plain = self.packed, self.plain
        assert packed.state == plain.state and sorted(packed.tensors) == sorted(plain.tensors)
        names = sorted(plain.tensors)
        for name in names:
            assert_same_tensor(packed.tensors[name], plain.tensors[name])
            assert_same_tensor(packed.tensors_view[name], plain.tensors_view[name])
            for memory in (packed, plain):
                tensor, view, attribute = self.held[id(memory)][name]
                assert tensor is memory.tensors[name] is attribute
                assert view is memory.tensors_view[name]
        records = packed.packed
        if records is not None:
            assert records.names <= PACKED
            buffer = records.buffer.untyped_storage().data_ptr()
            for name in records.names:
                assert packed.tensors[name].untyped_storage().data_ptr() == buffer
        if "lives" not in names:  # files hold no bfloat16
            a, b = packed.to_dataset().tensors, plain.to_dataset().tensors
            assert all(np.array_equal(a[n], b[n], equal_nan=a[n].dtype.kind == "f") for n in a)
        if len(plain):
            index = np.random.default_rng(seed).integers(0, len(plain), 7)
            for part in ([n for n in names if n in PACKED], [*names, "nope"]):
                got, expected = (m.sample_by_index(part, index, 2) for m in (packed, plain))
                for x, y in zip(sum(got, []), sum(expected, []), strict=True):
                    assert (x is None) == (y is None)
                    if x is not None:
                        assert_same_tensor(x, y)


def create(pair: Pair, name: str, seed: int) -> None:
    size, dtype, keep = SPECS[name]
    pair.both(lambda m: m.create_tensor(name, size, dtype, keep_dimensions=keep))
    pair.hold(name)


def add(pair: Pair, n: int, seed: int) -> None:
    envs = pair.plain.num_envs
    n = n if envs == 1 else min(n, envs - pair.plain.env_index)
    if pair.plain.tensors:
        samples = {name: values(name, (n,), seed + k) for k, name in enumerate(pair.plain.tensors)}
        pair.both(lambda m: m.add_samples(**samples))


def rows(pair: Pair, k: int, seed: int) -> None:
    if pair.plain.tensors and pair.plain.env_index == 0:
        lead = (k, pair.plain.num_envs)
        block = {name: values(name, lead, seed + i) for i, name in enumerate(pair.plain.tensors)}
        pair.both(lambda m: m.write_rows(block))


def in_place(pair: Pair, name: str, seed: int) -> None:
    """Write through the references held, as code that kept them does."""
    if name not in pair.plain.tensors:
        return
    row = seed % pair.plain.memory_size
    row_values = torch.as_tensor(values(name, (pair.plain.num_envs,), seed))
    slot_values = torch.as_tensor(values(name, (1,), seed + 1))

    def write(memory: RandomMemory) -> None:
        tensor, view, attribute = pair.held[id(memory)][name]
        tensor[row] = row_values
        view[seed % len(view) : seed % len(view) + 1] = slot_values
        attribute[row, 0] = attribute[row, -1].clone()

    pair.both(write)


def set_by_name(pair: Pair, name: str, seed: int) -> None:
    if name in pair.plain.tensors:
        whole = values(name, (pair.plain.memory_size, pair.plain.num_envs), seed)
        pair.both(lambda m: m.set_tensor_by_name(name, whole))


def grow(pair: Pair, extra: int, seed: int) -> None:
    if not (pair.plain.filled and pair.plain.env_index):
        pair.both(lambda m: m.grow(m.memory_size + extra))
        pair.hold()


def reset(pair: Pair, extra: int, seed: int) -> None:
    pair.both(lambda m: m.reset())


def pickled(pair: Pair, extra: int, seed: int) -> None:
    pair.packed, pair.plain = pair.both(lambda m: pickle.loads(pickle.dumps(m)))
    pair.hold()


def swap(pair: Pair, name: str, seed: int) -> None:
    """Swap a spare in, then (at an odd seed) the taken tensor back, as a shard writer does."""
    if name not in pair.plain.tensors:
        return
    spare = values(name, (pair.plain.memory_size, pair.plain.num_envs), seed)

    def swap_twice(memory: RandomMemory) -> None:
        taken = memory.swap_tensors({name: torch.as_tensor(spare).clone()})
        if seed % 2:
            memory.swap_tensors(taken)

    records = pair.packed.packed
    was_packed = records is not None and name in records.names
    pair.both(swap_twice)
    pair.hold(name)
    if seed % 2 and was_packed and pair.packed.packed is not None:
        assert name in pair.packed.packed.names  # the field taken out is back in its records


OPS: dict[str, tuple[Callable[..., None], st.SearchStrategy[Any]]] = {
    "create": (create, st.sampled_from(sorted(SPECS))),
    "add": (add, st.integers(1, 3)),
    "rows": (rows, st.integers(1, 4)),
    "in_place": (in_place, st.sampled_from(sorted(SPECS))),
    "set": (set_by_name, st.sampled_from(sorted(SPECS))),
    "grow": (grow, st.integers(1, 2)),
    "reset": (reset, st.just(0)),
    "pickle": (pickled, st.just(0)),
    "swap": (swap, st.sampled_from(sorted(SPECS))),
}
steps = st.one_of(
    [st.tuples(st.just(op), arg, st.integers(0, 2**16)) for op, (_, arg) in OPS.items()]
)


@settings(max_examples=60, deadline=None)
@example(  # a spare swapped in, then another: the one taken back never was a record field
    rows=1, envs=1, first=["actions"], ops=[("swap", "actions", 0), ("swap", "actions", 1)]
)
@given(
    rows=st.integers(1, 4),
    envs=st.integers(1, 3),
    first=st.lists(st.sampled_from(sorted(SPECS)), min_size=1, max_size=3, unique=True),
    ops=st.lists(steps, max_size=14),
)
def test_a_packed_memory_matches_an_unpacked_one_bit_for_bit(
    rows: int, envs: int, first: list[str], ops: list[tuple[str, Any, int]]
) -> None:
    pair = Pair(rows, envs)
    for name in first:
        create(pair, name, 0)
    pair.check(0)
    for op, arg, seed in ops:
        OPS[op][0](pair, arg, seed)
        pair.check(seed)


def test_a_tensor_held_before_a_later_create_tensor_still_reads_and_writes_the_memory() -> None:
    memory = RandomMemory(5, 2, "cpu")
    memory.create_tensor("observations", 4, torch.float32)
    observations = memory.tensors["observations"]
    flat = memory.tensors_view["observations"]
    memory.add_samples(observations=np.ones((2, 4), np.float32))
    before = observations.untyped_storage().data_ptr()
    memory.create_tensor("actions", 1, torch.int64)  # a wider buffer of records
    assert observations.untyped_storage().data_ptr() != before
    assert memory.tensors["observations"] is observations is memory._tensor_observations  # type: ignore[attr-defined]
    assert observations[0].eq(1).all() and observations[1].isnan().all()
    observations[3] = 5.0  # a write through the old reference lands in the memory
    flat[5] = 7.0
    memory.add_samples(observations=np.full((2, 4), 2, np.float32), actions=np.ones((2, 1)))
    [[rows]] = memory.sample_by_index(["observations"], [2, 3, 5])
    assert rows[:, 0].tolist() == [2.0, 2.0, 7.0]
    assert memory.to_dataset().tensors["observations"][3, 0, 0] == 5.0


def test_small_cpu_tensors_are_views_of_one_buffer_and_the_others_are_not() -> None:
    memory = Memory(3, 2, "cpu")
    for name, (size, dtype, keep) in SPECS.items():
        memory.create_tensor(name, size, dtype, keep_dimensions=keep)
    packed = memory.packed
    assert packed is not None and packed.names == PACKED
    buffer = packed.buffer.untyped_storage().data_ptr()
    for name, tensor in memory.tensors.items():
        assert (tensor.untyped_storage().data_ptr() == buffer) == (name in PACKED), name
        assert tensor.is_contiguous() == (name not in PACKED), name
    assert packed.dtype.itemsize % 8 == 0  # every record's int64 field aligned
    elsewhere = Memory(3, 2, "meta")  # not on the CPU (as on a GPU): nothing is packed
    elsewhere.create_tensor("rewards", 1, torch.float32)
    assert elsewhere.packed is None and elsewhere.tensors["rewards"].is_contiguous()


def test_a_pickled_memory_carries_its_records_once() -> None:
    memory = RandomMemory(1000, 4, "cpu")
    for name in ("observations", "actions", "rewards", "terminated"):
        size, dtype, keep = SPECS[name]
        memory.create_tensor(name, size, dtype, keep_dimensions=keep)
    assert memory.packed is not None
    assert len(pickle.dumps(memory)) < 1.2 * memory.packed.buffer.numel()


def test_shared_records_move_in_place_and_later_tensors_stay_out() -> None:
    memory = RandomMemory(4, 2, "cpu")
    memory.create_tensor("observations", 3, torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    observations = memory.tensors["observations"]
    memory.share_memory()
    assert observations.is_shared() and memory.tensors["terminated"].is_shared()
    memory.add_samples(observations=np.ones((2, 3), np.float32), terminated=np.ones((2, 1), bool))
    assert observations[0].eq(1).all() and memory.tensors_view["terminated"][:2].all()
    where = observations.data_ptr()
    memory.create_tensor("rewards", 1, torch.float32)  # others map the shared records: stay
    assert observations.data_ptr() == where and memory.tensors["rewards"].is_contiguous()
    assert memory.packed is not None and memory.packed.names == {"observations", "terminated"}
    memory.grow(6)  # what was shared is shared again; what was not, is not
    assert memory.tensors["observations"].is_shared() and not memory.tensors["rewards"].is_shared()
    assert memory.tensors["observations"][0].eq(1).all()
    assert memory.tensors["observations"][1:].isnan().all()


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_files_hold_the_same_bytes_as_an_unpacked_memorys(tmp_path: Path, suffix: str) -> None:
    pair = Pair(6, 3)
    for name in ("observations", "actions", "rewards", "terminated", "frames"):
        create(pair, name, 0)
    add(pair, 3, 1)
    rows(pair, 2, 2)
    add(pair, 2, 3)
    files = []
    for label, memory in (("packed", pair.packed), ("plain", pair.plain)):
        memory.metadata["created"] = "2026-01-01T00:00:00+00:00"
        files.append(save(memory.to_dataset(), tmp_path / f"{label}{suffix}"))
    assert Path(files[0]).read_bytes() == Path(files[1]).read_bytes()
