"""Random memories whose write order is recorded, and brute-force episode bookkeeping.

Every sample written carries a ``clock`` value (1, 2, 3, ...), so the chronological order
of an env column is simply its slots sorted by clock: the reference below never uses
the circular state, and so checks expcli's use of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import strategies as st

from expcli import RandomMemory


def make_memory(
    memory_size: int, num_envs: int, chunks: list[int], seed: int, p_done: float = 0.3
) -> RandomMemory:
    """Write samples in calls of ``chunks[i]`` samples (clipped to what one call may hold)."""
    memory = RandomMemory(memory_size, num_envs, "cpu")
    memory.create_tensor("clock", 1, torch.int64)
    memory.create_tensor("observations", (2,), torch.float32)
    memory.create_tensor("rewards", 1, torch.float32)
    memory.create_tensor("terminated", 1, torch.bool)
    memory.create_tensor("truncated", 1, torch.bool)
    rng = np.random.default_rng(seed)
    clock = 1
    for chunk in chunks:
        n = chunk if num_envs == 1 else min(chunk, num_envs - memory.env_index)
        done = rng.random(n) < p_done
        truncated = done & (rng.random(n) < 0.5)
        memory.add_samples(
            clock=np.arange(clock, clock + n)[:, None],
            observations=rng.normal(size=(n, 2)).astype(np.float32),
            rewards=rng.integers(-3, 4, (n, 1)).astype(np.float32),
            terminated=(done & ~truncated)[:, None],
            truncated=truncated[:, None],
        )
        clock += n
    return memory


memories = st.builds(
    make_memory,
    memory_size=st.integers(1, 7),
    num_envs=st.integers(1, 4),
    chunks=st.lists(st.integers(1, 9), min_size=1, max_size=40),
    seed=st.integers(0, 2**16),
)


@dataclass
class Reference:
    """Episode facts computed the slow way from the clock."""

    memory_size: int
    num_envs: int
    columns: list[list[int]]  # per env, flat indexes oldest first
    done: np.ndarray  # flat
    terminated: np.ndarray
    truncated: np.ndarray
    rewards: np.ndarray
    overwritten: list[bool]  # per env: its oldest kept sample is not the first it got

    @classmethod
    def of(cls, memory: RandomMemory) -> Reference:
        clock = memory.tensors["clock"][:, :, 0].numpy()
        size, envs = clock.shape
        columns = []
        for env in range(envs):
            rows = [t for t in np.argsort(clock[:, env], kind="stable") if clock[t, env] > 0]
            columns.append([int(t) * envs + env for t in rows])
        term = memory.tensors["terminated"].numpy().reshape(-1)
        trunc = memory.tensors["truncated"].numpy().reshape(-1)
        return cls(
            size,
            envs,
            columns,
            term | trunc,
            term,
            trunc,
            memory.tensors["rewards"].numpy().reshape(-1).astype(np.float64),
            # Samples go row by row, so column ``env``'s first has clock ``env + 1``.
            [bool(c) and int(clock.reshape(-1)[c[0]]) != env + 1 for env, c in enumerate(columns)],
        )

    def valid(self) -> list[int]:
        return sorted(i for column in self.columns for i in column)

    def _where(self, index: int) -> tuple[list[int], int]:
        column = self.columns[index % self.num_envs]
        return column, column.index(index)

    def prev(self, index: int) -> int:
        column, p = self._where(index)
        return index if p == 0 or self.done[column[p - 1]] else column[p - 1]

    def next(self, index: int) -> int:
        column, p = self._where(index)
        return index if p == len(column) - 1 or self.done[index] else column[p + 1]

    def stack(self, index: int, stack_num: int) -> list[int]:
        frames = [index]
        for _ in range(stack_num - 1):
            frames.insert(0, self.prev(frames[0]))
        return frames

    def episodes(self) -> list[tuple]:
        """(env, start, last, length, return, terminated, truncated, complete) rows."""
        out = []
        for env, column in enumerate(self.columns):
            current: list[int] = []
            for k, index in enumerate(column):
                current.append(index)
                if self.done[index] or k == len(column) - 1:
                    first_of_wrapped = self.overwritten[env] and current[0] == column[0]
                    out.append(
                        (
                            env,
                            current[0],
                            index,
                            len(current),
                            float(sum(self.rewards[i] for i in current)),
                            bool(self.terminated[index]),
                            bool(self.truncated[index]),
                            bool(self.done[index]) and not first_of_wrapped,
                        )
                    )
                    current = []
        return out

    def unfinished(self) -> list[int]:
        return [c[-1] for c in self.columns if c and not self.done[c[-1]]]
