"""Helpers shared by the memory tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import numpy as np
import torch

from expcli.memory import _storage


def assert_same_tensor(a: torch.Tensor, b: torch.Tensor) -> None:
    """Equal dtype, shape and bits (so NaN == NaN and -0.0 != 0.0)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype == torch.bfloat16:  # numpy has none: compare the bits as int16
        a, b = a.view(torch.int16), b.view(torch.int16)
    if a.dtype == torch.bool:
        assert torch.equal(a.detach().cpu(), b.detach().cpu())
    else:
        x, y = a.detach().cpu().numpy(), b.detach().cpu().numpy()
        assert x.tobytes() == y.tobytes()


def timeline_memory(cls: type, memory_size: int, num_envs: int, steps: int, partial: int = 0):
    """A memory whose ``time``/``env`` tensors record when and for which env a slot was written.

    ``steps`` full rows are added, then ``partial`` single-env samples.
    """
    memory = cls(memory_size, num_envs, "cpu")
    memory.create_tensor("time", 1, torch.int64)
    memory.create_tensor("env", 1, torch.int64)
    clock = 0
    for _ in range(steps):
        memory.add_samples(time=np.full((num_envs, 1), clock), env=np.arange(num_envs)[:, None])
        clock += 1
    for e in range(partial):
        memory.add_samples(time=np.array([clock]), env=np.array([e]))
    return memory


@contextlib.contextmanager
def unpacked() -> Iterator[None]:
    """While inside, memories create and load every tensor on its own, packing none.

    The reference that packed memories are checked against: what a memory was before its
    small CPU tensors shared one buffer of records.
    """
    with mock.patch.object(_storage, "joins_records", return_value=False):
        yield
