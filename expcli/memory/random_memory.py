"""RandomMemory: uniform sampling of transitions or of sequences from a ``Memory``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from expcli.errors import InvalidValueError
from expcli.memory.base import Batch, Memory

if TYPE_CHECKING:
    import torch

__all__ = ["RandomMemory"]


class RandomMemory(Memory):
    """A ``Memory`` whose ``sample`` draws uniformly among the valid transitions.

    Random numbers come from torch's global generator, so ``torch.manual_seed`` makes
    sampling reproducible, as in skrl.

    Args:
        memory_size: As for ``Memory``.
        num_envs: As for ``Memory``.
        device: As for ``Memory``.
        export: As for ``Memory``.
        export_format: As for ``Memory``.
        export_directory: As for ``Memory``.
        replacement: Draw with replacement (the batch size is always met), or without
            (a batch holds at most as many items as there are to draw).

    Raises:
        ValueError: A size is not a positive integer or the export format is unknown.
    """

    def __init__(
        self,
        memory_size: int,
        num_envs: int = 1,
        device: str | torch.device | None = None,
        export: bool = False,
        export_format: str = "pt",
        export_directory: str = "",
        replacement: bool = True,
    ) -> None:
        super().__init__(memory_size, num_envs, device, export, export_format, export_directory)
        self._replacement = replacement

    def sample(
        self,
        names: Sequence[str],
        batch_size: int,
        mini_batches: int = 1,
        sequence_length: int = 1,
    ) -> Batch:
        """Draw ``batch_size`` transitions, or sequences of ``sequence_length`` transitions.

        A sequence is ``sequence_length`` consecutive steps of one env, oldest first: it
        never mixes envs and never spans the write head, where the newest data meets the
        oldest. Sequences come one after another, so the tensors are shaped
        ``(batch_size * sequence_length, *feature)``.

        Returns:
            One list per mini-batch, each holding a tensor per name (None for unknown names).

        Raises:
            ValueError: The memory holds fewer transitions than one sample needs, or a
                size argument is not positive.
        """
        if batch_size < 1 or mini_batches < 1 or sequence_length < 1:
            raise InvalidValueError(
                "batch_size, mini_batches and sequence_length must be positive, got "
                f"{batch_size}, {mini_batches}, {sequence_length}"
            )
        count = len(self) - (sequence_length - 1) * self.num_envs
        if count < 1:
            raise InvalidValueError(
                f"Cannot sample sequences of {sequence_length} step(s): the memory holds "
                f"{len(self)} transition(s) over {self.num_envs} env(s)"
            )
        starts = _draw(count, batch_size, self._replacement)
        index = starts if sequence_length == 1 else self._sequences(starts, sequence_length)
        import torch

        self.sampling_indexes = torch.from_numpy(index)
        return self.sample_by_index(names, index, mini_batches)

    def _sequences(self, starts: np.ndarray, length: int) -> np.ndarray:
        """Flat indexes of the sequences whose first steps are the ``starts``-th valid ones.

        Valid starts are numbered in time-major order per env column, counting from each
        column's oldest row, so that every start leaves ``length - 1`` newer steps after it.
        """
        num_envs, memory_size = self.num_envs, self.memory_size
        step, env = np.divmod(starts, num_envs)
        if self.filled:
            oldest = np.full(num_envs, self.memory_index, dtype=np.int64)
            oldest[: self.env_index] += 1
            step = step + oldest[env]
        if length > 1:
            step = step[:, None] + np.arange(length, dtype=np.int64)
            env = env[:, None]
        rows = step % memory_size if self.filled else step
        return np.asarray((rows * num_envs + env).reshape(-1))


def _draw(count: int, size: int, replacement: bool) -> np.ndarray:
    """``size`` integers in ``[0, count)`` from torch's generator; distinct without replacement."""
    import torch

    if replacement:
        return torch.randint(0, count, (size,)).numpy()
    if size >= count:
        return torch.randperm(count).numpy()
    if size * 4 > count:
        return torch.randperm(count)[:size].numpy()
    # Few items from many: draw, then redraw the duplicates. Relabelling the population
    # leaves the procedure unchanged, so every ordered draw of distinct items is equally
    # likely, and it costs O(size) instead of a permutation of the whole memory.
    drawn = torch.randint(0, count, (size,)).numpy()
    while True:
        _, first = np.unique(drawn, return_index=True)
        if len(first) == size:
            return drawn
        repeated = np.ones(size, dtype=bool)
        repeated[first] = False
        drawn[repeated] = torch.randint(0, count, (int(repeated.sum()),)).numpy()
