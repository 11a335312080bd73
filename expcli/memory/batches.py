"""DictBatch and TemporalBatch: named torch tensors sharing batch (and time) dimensions.

They follow rlstructures' ``DictTensor`` and ``TemporalDictTensor``: a ``DictBatch`` holds
tensors shaped ``(B, ...)``; a ``TemporalBatch`` holds tensors shaped ``(B, T, ...)`` of
sequences of different lengths, padded with zeros, with ``lengths`` and ``mask()``. Both are
read-only mappings from name to tensor, so ``batch["observations"]`` and ``dict(batch)``
work as for a plain dict.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import torch

from expcli.errors import InvalidValueError

__all__ = ["DictBatch", "TemporalBatch"]


class _Batch(Mapping[str, torch.Tensor]):
    """The mapping part shared by both batch types."""

    _tensors: dict[str, torch.Tensor]

    def __getitem__(self, key: str) -> torch.Tensor:
        return self._tensors[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)

    def n_elems(self) -> int:
        """Size of the batch dimension (the first one of every tensor)."""
        first = next(iter(self._tensors.values()), None)
        return 0 if first is None else int(first.shape[0])

    def device(self) -> torch.device | None:
        """Device of the tensors (None for an empty batch)."""
        first = next(iter(self._tensors.values()), None)
        return None if first is None else first.device

    def _pick(self, keys: Iterable[str]) -> dict[str, torch.Tensor]:
        missing = [k for k in keys if k not in self._tensors]
        if missing:
            raise KeyError(f"no tensors named {missing}; tensors: {sorted(self._tensors)}")
        return {k: self._tensors[k] for k in keys}

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{k}: {tuple(v.shape)} {str(v.dtype).removeprefix('torch.')}"
            for k, v in self._tensors.items()
        )
        return f"{type(self).__name__}({fields})"


class DictBatch(_Batch):
    """Named tensors with a common first (batch) dimension: rlstructures' ``DictTensor``.

    Args:
        tensors: Name to tensor; every tensor has the same first dimension.

    Raises:
        ValueError: The tensors disagree on the batch size, or one is 0-dimensional.
    """

    def __init__(self, tensors: Mapping[str, torch.Tensor] | None = None) -> None:
        self._tensors = dict(tensors or {})
        sizes = {k: tuple(v.shape[:1]) for k, v in self._tensors.items()}
        if any(not s for s in sizes.values()) or len(set(sizes.values())) > 1:
            raise InvalidValueError(
                f"tensors must share their first (batch) dimension, got {sizes}"
            )

    @classmethod
    def of(cls, tensors: dict[str, torch.Tensor]) -> DictBatch:
        """A batch of tensors known to agree on the batch size (no checks: the fast path)."""
        batch = cls.__new__(cls)
        batch._tensors = tensors
        return batch

    def set(self, key: str, value: torch.Tensor) -> None:
        """Add or replace a tensor of the same batch size."""
        if self._tensors and int(value.shape[0]) != self.n_elems():
            raise InvalidValueError(
                f"{key!r} has batch size {value.shape[0]}, not {self.n_elems()}"
            )
        self._tensors[key] = value

    def slice(self, index_from: int, index_to: int | None = None) -> DictBatch:
        """Batch rows ``index_from`` to ``index_to`` (exclusive; just one row when None)."""
        stop = index_from + 1 if index_to is None else index_to
        return DictBatch({k: v[index_from:stop] for k, v in self._tensors.items()})

    def index(self, index: int) -> DictBatch:
        """The one-row batch at ``index`` (``slice(index)``)."""
        return self.slice(index)

    def get(self, keys: Iterable[str] | str, clone: bool = False) -> Any:  # type: ignore[override]
        """A batch of the tensors named in ``keys`` (cloned on request).

        A name alone gives that tensor, as ``Mapping.get`` would.

        Raises:
            KeyError: A key names no tensor.
        """
        if isinstance(keys, str):
            return self._tensors.get(keys)
        picked = self._pick(keys)
        return DictBatch({k: v.clone() if clone else v for k, v in picked.items()})

    def prepend_key(self, prefix: str) -> DictBatch:
        """The same tensors with ``prefix`` put before every name."""
        return DictBatch({prefix + k: v for k, v in self._tensors.items()})

    def truncate_key(self, prefix: str) -> DictBatch:
        """The tensors whose names start with ``prefix``, with the prefix removed."""
        return DictBatch(
            {k[len(prefix) :]: v for k, v in self._tensors.items() if k.startswith(prefix)}
        )

    def unfold(self) -> list[DictBatch]:
        """One single-row batch per batch element."""
        return [self.slice(i) for i in range(self.n_elems())]

    def clone(self) -> DictBatch:
        """A copy with cloned tensors."""
        return DictBatch({k: v.clone() for k, v in self._tensors.items()})

    def to(self, device: str | torch.device) -> DictBatch:
        """The tensors on ``device`` (the same batch when they are there already)."""
        return DictBatch({k: v.to(device) for k, v in self._tensors.items()})

    @staticmethod
    def cat(batches: Sequence[DictBatch]) -> DictBatch:
        """Concatenate batches with the same names along the batch dimension."""
        if not batches:
            return DictBatch()
        return DictBatch({k: torch.cat([b[k] for b in batches]) for k in batches[0]})


class TemporalBatch(_Batch):
    """Sequences of different lengths as ``(B, T, ...)`` tensors: rlstructures' TemporalDictTensor.

    Steps at ``t >= lengths[b]`` are padding (zeros when expcli builds the batch).

    Args:
        tensors: Name to tensor shaped ``(B, T, ...)``, all with the same ``B`` and ``T``.
        lengths: Valid steps of each sequence, ``(B,)`` integers in ``0..T``; default ``T``.

    Raises:
        ValueError: Shapes disagree, or lengths are not in ``0..T``.
    """

    def __init__(
        self, tensors: Mapping[str, torch.Tensor], lengths: torch.Tensor | None = None
    ) -> None:
        self._tensors = dict(tensors)
        sizes = {k: tuple(v.shape[:2]) for k, v in self._tensors.items()}
        if any(len(s) < 2 for s in sizes.values()) or len(set(sizes.values())) > 1:
            raise InvalidValueError(
                f"tensors must share their first two (B, T) dimensions, got {sizes}"
            )
        batch, steps = next(iter(sizes.values()), (0, 0))
        if lengths is None:
            lengths = torch.full((batch,), steps, dtype=torch.int64)
        lengths = torch.as_tensor(lengths, dtype=torch.int64)
        if tuple(lengths.shape) != (batch,) or (
            batch and (int(lengths.min()) < 0 or int(lengths.max()) > steps)
        ):
            raise InvalidValueError(
                f"lengths must be {batch} integers in 0..{steps}, got {lengths}"
            )
        self.lengths = lengths

    @property
    def max_len(self) -> int:
        """``T``, the padded time dimension."""
        first = next(iter(self._tensors.values()), None)
        return 0 if first is None else int(first.shape[1])

    def mask(self) -> torch.Tensor:
        """``(B, T)`` float32: 1.0 where a step holds data, 0.0 on padding."""
        steps = torch.arange(self.max_len, device=self.lengths.device)
        return (steps[None, :] < self.lengths[:, None]).to(torch.float32)

    def _new(self, tensors: dict[str, torch.Tensor], lengths: torch.Tensor) -> TemporalBatch:
        return TemporalBatch(tensors, lengths)

    def slice(self, index_from: int, index_to: int | None = None) -> TemporalBatch:
        """Sequences ``index_from`` to ``index_to`` (exclusive; just one when None)."""
        stop = index_from + 1 if index_to is None else index_to
        return self._new(
            {k: v[index_from:stop] for k, v in self._tensors.items()},
            self.lengths[index_from:stop],
        )

    def index(self, index: int) -> TemporalBatch:
        """The ``1 x T`` batch of sequence ``index``."""
        return self.slice(index)

    def get(self, keys: Iterable[str] | str) -> Any:  # type: ignore[override]
        """A batch of the tensors named in ``keys``; a name alone gives that tensor."""
        if isinstance(keys, str):
            return self._tensors.get(keys)
        return self._new(self._pick(keys), self.lengths)

    def temporal_slice(self, index_from: int, index_to: int) -> TemporalBatch:
        """Steps ``index_from`` to ``index_to`` (exclusive) of every sequence."""
        if not 0 <= index_from <= index_to <= self.max_len:
            raise InvalidValueError(f"need 0 <= {index_from} <= {index_to} <= {self.max_len}")
        lengths = (self.lengths - index_from).clamp(0, index_to - index_from)
        return self._new({k: v[:, index_from:index_to] for k, v in self._tensors.items()}, lengths)

    def temporal_index(self, index_t: int) -> DictBatch:
        """Step ``index_t`` of every sequence (padding included) as a ``DictBatch``."""
        return DictBatch({k: v[:, index_t] for k, v in self._tensors.items()})

    def masked_temporal_index(self, index_t: int) -> tuple[DictBatch, torch.Tensor]:
        """Step ``index_t`` of the sequences that reach it, and their batch positions."""
        keep = torch.nonzero(self.lengths > index_t).reshape(-1)
        return DictBatch({k: v[keep, index_t] for k, v in self._tensors.items()}), keep

    def shorten(self) -> TemporalBatch:
        """Trim the time dimension to the longest sequence."""
        longest = int(self.lengths.max()) if len(self.lengths) else 0
        return self.temporal_slice(0, longest)

    def unfold(self) -> list[TemporalBatch]:
        """One ``1 x T`` batch per sequence."""
        return [self.slice(i) for i in range(self.n_elems())]

    def flatten(self) -> DictBatch:
        """The valid steps only, sequence after sequence, as a ``(sum(lengths), ...)`` batch."""
        keep = self.mask().to(torch.bool)
        return DictBatch({k: v[keep] for k, v in self._tensors.items()})

    def to(self, device: str | torch.device) -> TemporalBatch:
        """The tensors and lengths on ``device``."""
        return self._new(
            {k: v.to(device) for k, v in self._tensors.items()}, self.lengths.to(device)
        )

    @staticmethod
    def cat(batches: Sequence[TemporalBatch]) -> TemporalBatch:
        """Concatenate along the batch dimension, padding every batch to the longest ``T``."""
        if not batches:
            return TemporalBatch({})
        steps = max(b.max_len for b in batches)
        tensors = {}
        for key in batches[0]:
            parts = []
            for b in batches:
                v = b[key]
                pad = steps - v.shape[1]
                if pad:
                    v = torch.cat([v, v.new_zeros((v.shape[0], pad, *v.shape[2:]))], dim=1)
                parts.append(v)
            tensors[key] = torch.cat(parts)
        return TemporalBatch(tensors, torch.cat([b.lengths for b in batches]))
