"""A Memory sent to another process (pickled, as Ray does) still writes into its tensors."""

from __future__ import annotations

import pickle

import numpy as np
import torch

from expcli.memory import RandomMemory


def test_a_pickled_memory_writes_into_its_own_tensors() -> None:
    memory = RandomMemory(memory_size=3, num_envs=2, device="cpu")
    memory.create_tensor("observations", 2, torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    memory.add_samples(observations=np.ones((2, 2), np.float32), terminated=np.zeros((2, 1), bool))
    copy = pickle.loads(pickle.dumps(memory))
    assert (copy.memory_index, copy.filled, copy.metadata) == (1, False, {})
    copy.add_samples(observations=np.full((2, 2), 7, np.float32), terminated=np.ones((2, 1), bool))
    copy.write_row({"observations": np.full((2, 2), 8, np.float32)})
    observations = copy.get_tensor_by_name("observations")
    assert observations[:, 0, 0].tolist() == [1.0, 7.0, 8.0]
    assert copy.get_tensor_by_name("observations", keepdim=False)[4, 0].item() == 8.0
    assert copy._tensor_observations is observations  # type: ignore[attr-defined]  # skrl's
    assert copy.filled and copy.episodes().terminated.tolist() == [True, False, True, False]
    assert memory.tensors["observations"][1, 0, 0].isnan()  # the original is untouched
