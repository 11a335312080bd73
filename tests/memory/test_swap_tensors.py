"""Memory.swap_tensors: double buffering without a copy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from expcli.errors import ExpcliError
from expcli.memory import Memory


def _memory() -> Memory:
    memory = Memory(memory_size=3, num_envs=2)
    memory.create_tensor("obs", 2, torch.float32)
    memory.create_tensor("act", 1, torch.int64)
    return memory


def test_rows_go_to_the_spare_and_the_taken_tensor_keeps_the_old_rows() -> None:
    memory = _memory()
    for t in range(3):
        memory.add_samples(obs=torch.full((2, 2), float(t)), act=torch.full((2, 1), t))
    before = memory.revision
    spare = torch.zeros_like(memory.tensors["obs"])
    taken = memory.swap_tensors({"obs": spare})
    assert memory.revision != before  # cached readers take new views
    assert (memory.memory_index, memory.filled) == (0, True)
    memory.add_samples(obs=torch.full((2, 2), 9.0), act=torch.full((2, 1), 9))
    np.testing.assert_array_equal(taken["obs"][:, 0, 0].cpu().numpy(), [0.0, 1.0, 2.0])
    assert memory.tensors["obs"] is spare
    assert spare[0, 0, 0].item() == 9.0 and spare[1, 0, 0].item() == 0.0
    assert memory.get_tensor_by_name("obs", keepdim=False).data_ptr() == spare.data_ptr()
    assert memory.tensors["act"][0, 0, 0].item() == 9  # not swapped: written in place


@pytest.mark.parametrize(
    "spares",
    [
        {"nope": torch.zeros(3, 2, 2)},
        {"obs": torch.zeros(3, 2, 3)},
        {"obs": torch.zeros(3, 2, 2, dtype=torch.float64)},
    ],
)
def test_a_spare_that_does_not_fit_is_refused_and_nothing_is_swapped(
    spares: dict[str, torch.Tensor],
) -> None:
    memory = _memory()
    obs = memory.tensors["obs"]
    with pytest.raises(ExpcliError, match="obs|nope"):
        memory.swap_tensors(spares)
    assert memory.tensors["obs"] is obs
