"""Content fingerprints of episodes: which episodes hold the same data, bit for bit.

An episode's fingerprint (``digest``) is a 16-byte BLAKE2b digest of a header that names
every tensor (in name order: name, dtype, feature shape), then the episode's transitions in
order, each as the bytes of every tensor's row in name order, then its length. Two episodes
get the same digest when, and only when (barring a collision, about 2^-128 a pair), they
have the same tensors, the same length and bit-identical values: NaN equals NaN, 0.0 and
-0.0 differ, and a float32 copy of float64 data is another episode.

Transition by transition, rather than tensor by tensor, so that an episode is hashed as the
chunks of the chronological pass go by (``chronology.chunks``), cut where the statistics cut
it (``episodes.EpisodeCutter``): each env column keeps one open hash state, fed once per chunk
with the rows of its open episode that the chunk holds, all tensors at once. Memory is one
chunk (twice: the rows are laid out transition by transition) and a few hundred bytes per
column, whatever the file size; no episode is held.

Episodes are numbered in the order their last transition appears among all transitions in
chronological order (row by row, in a row env column by env column); the episodes the columns
leave open come after them all, in column order.

Each episode also gets ``end``, a 64-bit key of its final next observation (its last
observation without ``next_observations``, its whole last transition without either): a
random linear map of the bytes, which two different observations share with a chance of
2^-56 at most. Whether distinct episodes end alike tells whether an exact repeat can be
chance (``duplicates``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from expcli.formats.column_roles import ColumnRoles
from expcli.formats.dataset import Dataset
from expcli.summary.chronology import PASS_CHUNK_BYTES, Chunk, chunks, segments
from expcli.summary.episodes import EpisodeCutter, Pieces, chunk_flags, episode_cutter

__all__ = ["FINGERPRINT_DTYPE", "FingerprintAccumulator", "episode_fingerprints"]

FINGERPRINT_DTYPE = np.dtype(
    [
        ("index", np.int64),
        ("env", np.int64),
        ("length", np.int64),
        ("complete", np.bool_),
        ("digest", "S32"),
        ("end", np.uint64),
    ]
)
"""One record per episode; ``digest`` is hexadecimal, as ASCII bytes."""

_OBSERVATIONS, _NEXT = "observations", "next_observations"
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


class FingerprintAccumulator:
    """Fingerprints the episodes of every env column through chronologically ordered chunks.

    Args:
        specs: Name to ``(dtype, feature shape)`` of every tensor; the chunks hold them all.
        cutter: The cutter whose pieces ``update`` gets (which it may share with others).
    """

    def __init__(
        self, specs: Mapping[str, tuple[np.dtype[Any], tuple[int, ...]]], cutter: EpisodeCutter
    ) -> None:
        num_envs = cutter.num_envs
        self._names = sorted(specs)
        self._widths = [
            np.dtype(specs[n][0]).itemsize * math.prod(specs[n][1]) for n in self._names
        ]
        header = [[n, np.dtype(specs[n][0]).str, list(specs[n][1])] for n in self._names]
        self._empty = hashlib.blake2b(json.dumps(header).encode(), digest_size=16)
        self._hashes: list[hashlib.blake2b] = [self._empty.copy() for _ in range(num_envs)]
        for prefix in (_NEXT, _OBSERVATIONS, ""):  # the first there is
            self._final = self._bytes_of(prefix)
            if self._final.size:
                break
        self._last_final = np.zeros((num_envs, len(self._final)), dtype=np.uint8)
        # odd weights: rows that differ in one byte only never share a key
        weights = np.random.default_rng(0).integers(0, 2**63, len(self._final), np.uint64)
        self._weights = weights * np.uint64(2) + np.uint64(1)
        self._cutter = cutter
        self._closed: list[np.ndarray] = []

    def _bytes_of(self, prefix: str) -> np.ndarray:
        """Where the tensor ``prefix`` (or its leaves ``prefix/...``) lies in a transition's bytes.

        Every tensor for the prefix ``""``.
        """
        offsets = np.cumsum([0, *self._widths])
        spans = [
            np.arange(offsets[k], offsets[k + 1])
            for k, name in enumerate(self._names)
            if not prefix or name == prefix or name.startswith(prefix + "/")
        ]
        return np.concatenate(spans).astype(np.intp) if spans else np.zeros(0, np.intp)

    def update(self, chunk: Chunk, pieces: Pieces) -> None:
        """Hash one chunk, cut into ``pieces``."""
        records = _transitions(chunk, self._names, self._widths)
        stops, closed, last = pieces.stops, pieces.closed, pieces.last
        self._last_final[pieces.column[last]] = records[np.ix_(stops[last] - 1, self._final)]
        width = records.shape[1]
        flat = records.reshape(-1).data  # a memoryview: sliced faster than the array
        hashes, empty, digests = self._hashes, self._empty, []
        for column, start, stop, close, length in zip(
            pieces.column.tolist(),
            (pieces.starts * width).tolist(),
            (stops * width).tolist(),
            closed.tolist(),
            pieces.lengths.tolist(),
            strict=True,
        ):
            state = hashes[column]
            state.update(flat[start:stop])
            if close:
                state.update(length.to_bytes(8, "little"))
                digests.append(state.digest())
                hashes[column] = empty.copy()
        # Row by row, then column by column: the chronological order inside a chunk.
        order = np.lexsort((pieces.column[closed], pieces.last_row[closed]))
        out = np.zeros(len(order), dtype=FINGERPRINT_DTYPE)
        out["env"] = pieces.column[closed][order]
        out["length"] = pieces.lengths[closed][order]
        out["complete"] = pieces.complete[closed][order]
        out["digest"] = _hex(b"".join(digests))[order]
        out["end"] = self._end(records[np.ix_(stops[closed] - 1, self._final)])[order]
        self._closed.append(out)

    def _end(self, finals: np.ndarray) -> np.ndarray:
        """The ``end`` keys of episodes whose final (next) observations are rows of ``finals``."""
        keys: np.ndarray = finals @ self._weights  # wraps around modulo 2^64
        return keys

    def result(self) -> np.ndarray:
        """Every episode's record (``FINGERPRINT_DTYPE``), numbered as the module says."""
        open_ = np.flatnonzero(self._cutter.length > 0)
        tail = np.zeros(len(open_), dtype=FINGERPRINT_DTYPE)
        tail["env"] = open_
        tail["length"] = self._cutter.length[open_]
        digests = []
        for column, length in zip(open_.tolist(), tail["length"].tolist(), strict=True):
            state = self._hashes[column].copy()
            state.update(length.to_bytes(8, "little"))
            digests.append(state.digest())
        tail["digest"] = _hex(b"".join(digests))
        tail["end"] = self._end(self._last_final[open_])
        out = np.concatenate([*self._closed, tail])
        out["index"] = np.arange(len(out))
        return out


def episode_fingerprints(
    source: str | os.PathLike[str] | Dataset,
    *,
    num_envs: int | None = None,
    chunk_bytes: int = PASS_CHUNK_BYTES,
    progress: Callable[[float], None] | None = None,
    mapping: ColumnRoles | None = None,
) -> np.ndarray:
    """The fingerprint of every episode of a dataset, read a chunk at a time.

    Args:
        source: A dataset, or a file or folder of any format and layout expcli reads.
        num_envs: Env columns of a file that does not record them (see ``expcli.load``).
        chunk_bytes: About how many bytes of all tensors one chunk holds.
        progress: Called with the fraction of transitions hashed so far.
        mapping: How a table is read (``--columns``, ``--done-means``).

    Returns:
        One ``FINGERPRINT_DTYPE`` record per episode, in index order.

    Raises:
        FormatError, SchemaError: As ``expcli.formats.open_lazy``.
    """
    if isinstance(source, Dataset):
        return _fingerprints(source, chunk_bytes, progress)
    from expcli.formats import open_lazy

    dataset, close = open_lazy(source, num_envs=num_envs, mapping=mapping)
    try:
        return _fingerprints(dataset, chunk_bytes, progress)
    finally:
        close()


def _fingerprints(
    dataset: Dataset, chunk_bytes: int, progress: Callable[[float], None] | None
) -> np.ndarray:
    tensors, state = dataset.tensors, dataset.state
    size, envs = dataset.memory_size, dataset.num_envs
    specs = {name: (np.dtype(a.dtype), tuple(a.shape[2:])) for name, a in tensors.items()}
    cutter = episode_cutter(dataset.metadata, state, size, envs)
    fingerprints = FingerprintAccumulator(specs, cutter)
    total, seen = state.valid_length(size, envs), 0
    for chunk in chunks(tensors, sorted(tensors), segments(state, size, envs), chunk_bytes):
        terminated, truncated = chunk_flags(chunk)
        pieces = cutter.cut(chunk.start, chunk.columns, terminated | truncated)
        if pieces is not None:
            fingerprints.update(chunk, pieces)
        seen += (chunk.stop - chunk.start) * (chunk.last - chunk.first)
        if progress is not None and total:
            progress(seen / total)
    return fingerprints.result()


def _transitions(chunk: Chunk, names: list[str], widths: list[int]) -> np.ndarray:
    """A chunk's transitions as bytes, column-major: ``(columns * rows, bytes of a transition)``.

    Each row is one transition: every tensor's row in name order; the rows of a column are
    consecutive, so an episode's piece is one contiguous slice.
    """
    rows, columns = chunk.stop - chunk.start, chunk.last - chunk.first
    out = np.empty((columns, rows, sum(widths)), dtype=np.uint8)
    offset = 0
    for name, width in zip(names, widths, strict=True):
        if width:
            flat = chunk.arrays[name].reshape(rows, columns, -1)
            if flat.strides[2] != flat.itemsize:
                flat = np.ascontiguousarray(flat)
            out[:, :, offset : offset + width] = flat.view(np.uint8).swapaxes(0, 1)
        offset += width
    return out.reshape(columns * rows, out.shape[2])


def _hex(digests: bytes) -> np.ndarray:
    """Digests of 16 bytes, one after the other, as hexadecimal ``S32`` strings."""
    raw = np.frombuffer(digests, dtype=np.uint8).reshape(-1, 16)
    out = np.empty((len(raw), 16, 2), dtype=np.uint8)
    out[:, :, 0], out[:, :, 1] = _HEX[raw >> 4], _HEX[raw & 15]
    return out.reshape(len(raw), 32).view("S32").reshape(-1)
