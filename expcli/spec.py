"""Dataset schema v1: names, dtypes, circular state and metadata (numpy only).

Every format carries the same thing: named tensors shaped ``(T, N, *feature)`` (``T`` rows =
memory size, ``N`` columns = envs), the circular state of the memory that wrote them, and a
JSON metadata object. This module is the single place that knows the keys of that object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from expcli.errors import InvalidTypeError, InvalidValueError

__all__ = [
    "COMPRESSIONS",
    "FRAMES_SCHEMA",
    "INFO_PREFIX",
    "METADATA_KEY",
    "SCHEMA",
    "STANDARD_NAMES",
    "SUPPORTED_DTYPES",
    "CircularState",
    "FramesForm",
    "ImagesForm",
    "TensorSpec",
    "chronological_rows",
    "done_flags",
    "flag_rows",
    "oldest_rows",
    "overwritten_columns",
]

SCHEMA = "expcli/1"
"""Value of the ``schema`` key of the metadata objects expcli writes with every tensor whole."""

FRAMES_SCHEMA = "expcli/2"
"""The ``schema`` of a file that stores some next observations once (its ``frames`` key says
which): a reader of ``expcli/1`` alone refuses it rather than miss ``next_observations``."""

METADATA_KEY = "__expcli__"
"""Key under which ``.pt`` and ``.npz`` files keep the metadata JSON string."""

INFO_PREFIX = "infos/"
"""Prefix of the tensors ``collect --infos`` stores; NaN there means "not reported"."""

STANDARD_NAMES = (
    "observations",
    "next_observations",
    "actions",
    "rewards",
    "terminated",
    "truncated",
)

SUPPORTED_DTYPES = frozenset(
    {
        "bool",
        "uint8",
        "int8",
        "int16",
        "int32",
        "int64",
        "float16",
        "float32",
        "float64",
    }
)
"""Dtypes that every format stores losslessly."""


class FramesForm(StrEnum):
    """How a writer stores next-observation tensors (``formats.frames``).

    ONCE: a cell equal, byte for byte, to the next row's observation of its env column is
    not stored again (the default, for cells of ``FRAMES_CELL_BYTES`` or more); FULL: every
    cell is stored, as in schema ``expcli/1``.
    """

    FULL = "full"
    ONCE = "once"


class ImagesForm(StrEnum):
    """How a Parquet writer stores image-like uint8 frames (``(H, W)``, ``(H, W, 1|3|4)``).

    PNG: a PNG a cell, in HF ``datasets``' ``Image`` struct, so that HF reads images and
    arrays (the default); RAW: the frame's bytes (``fixed_size_binary``), faster to write
    and to draw random batches from while the block cache holds the file
    (``benchmarks/parquet_frames.py``).
    """

    PNG = "png"
    RAW = "raw"


class Compression(StrEnum):
    """Compressions a dataset file may use.

    HDF5 takes NONE, GZIP and LZF; Parquet NONE, ZSTD (its default), SNAPPY and GZIP; the
    other formats NONE.
    """

    NONE = "none"
    GZIP = "gzip"
    LZF = "lzf"
    ZSTD = "zstd"
    SNAPPY = "snappy"


COMPRESSIONS: tuple[str, ...] = tuple(c.value for c in Compression)
"""The spellings of ``Compression``, in the order help texts list them."""


@dataclass(frozen=True, slots=True)
class CircularState:
    """Where a circular memory writes next, and whether it has wrapped.

    The first three fields cannot tell a memory that is exactly full (every row written
    once) from one that wrapped whole laps: both are ``filled`` with the head at row 0.
    ``written`` can, so memories record it and files keep it; ``overwritten_columns`` is
    the one place that reads it (with a fallback for files that lack it).

    Attributes:
        memory_index: Row (first index) that the next sample goes to.
        env_index: Column (second index) that the next sample goes to within that row.
        filled: True once every row has been written at least once.
        written: Transitions ever written, row by row, those since overwritten included;
            None when not recorded (files from before it was, foreign layouts). Two states
            at the same write head compare equal whatever their ``written``.
    """

    memory_index: int = 0
    env_index: int = 0
    filled: bool = False
    written: int | None = field(default=None, compare=False)

    def valid_length(self, memory_size: int, num_envs: int) -> int:
        """Number of transitions written (skrl's ``len(memory)``)."""
        if self.filled:
            return memory_size * num_envs
        return self.memory_index * num_envs + self.env_index

    def columns(self, memory_size: int, num_envs: int) -> tuple[np.ndarray, np.ndarray]:
        """Oldest row and number of valid rows of every env column (int64 arrays)."""
        envs = np.arange(num_envs)
        ahead = envs < self.env_index  # columns already written in the current row
        if self.filled:
            oldest = (self.memory_index + ahead) % max(memory_size, 1)
            count = np.full(num_envs, memory_size, dtype=np.int64)
        else:
            oldest = np.zeros(num_envs, dtype=np.int64)
            count = self.memory_index + ahead.astype(np.int64)
        return oldest.astype(np.int64), count

    def check(self, memory_size: int, num_envs: int) -> None:
        """Raise ValueError when the state cannot belong to a memory of this size."""
        if not 0 <= self.memory_index < max(memory_size, 1):
            raise InvalidValueError(
                f"memory_index {self.memory_index} is outside 0..{memory_size - 1}"
            )
        if not 0 <= self.env_index < max(num_envs, 1):
            raise InvalidValueError(f"env_index {self.env_index} is outside 0..{num_envs - 1}")

    def to_json(self) -> dict[str, Any]:
        """The keys as they appear in the metadata object (``written`` only when recorded)."""
        out: dict[str, Any] = {
            "memory_index": self.memory_index,
            "env_index": self.env_index,
            "filled": self.filled,
        }
        if self.written is not None:
            out["written"] = self.written
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CircularState:
        """Read the keys back; raises KeyError, TypeError or ValueError when malformed.

        ``written`` is optional (files from before it was recorded lack it).
        """
        memory_index, env_index, filled = obj["memory_index"], obj["env_index"], obj["filled"]
        if not (isinstance(memory_index, int) and isinstance(env_index, int)):
            raise InvalidTypeError("memory_index and env_index must be integers")
        if not isinstance(filled, bool):
            raise InvalidTypeError("filled must be true or false")
        written = obj.get("written")
        if written is not None and (type(written) is not int or written < 0):
            raise InvalidTypeError("written must be a non-negative integer")
        return cls(memory_index, env_index, filled, written)


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """Name, dtype (numpy's name) and feature shape of one stored tensor."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @classmethod
    def of(cls, name: str, array: np.ndarray) -> TensorSpec:
        """The spec of an array shaped ``(T, N, *feature)``."""
        return cls(name, array.dtype.name, tuple(int(d) for d in array.shape[2:]))

    def to_json(self) -> dict[str, Any]:
        """``{"dtype": ..., "shape": [...]}`` as stored under ``tensors`` in the metadata."""
        return {"dtype": self.dtype, "shape": list(self.shape)}


def chronological_rows(state: CircularState, memory_size: int, num_envs: int) -> np.ndarray:
    """Row order, oldest first, of every env column: an int64 array shaped ``(N, T)``.

    A column's oldest row is where its next write goes once the memory has wrapped (one row
    further on for the columns already written in the current row); before that, row 0.
    Unwritten rows, if any, come last, so ``[:, :valid]`` is the chronological data.
    """
    rows = oldest_rows(state, num_envs)[:, None] + np.arange(memory_size, dtype=np.int64)[None, :]
    return np.asarray(rows % max(memory_size, 1))


def oldest_rows(state: CircularState, num_envs: int) -> np.ndarray:
    """Each env column's oldest stored row, ``(N,)`` int64: where ``chronological_rows`` starts.

    A column's transition at stored row ``r`` is then the ``(r - oldest) % T``-th of it.
    """
    offsets = np.zeros(num_envs, dtype=np.int64)
    if state.filled:
        offsets += state.memory_index
        offsets[: state.env_index] += 1
    return offsets


def flag_rows(tensors: Mapping[str, Any], name: str, memory_size: int, num_envs: int) -> np.ndarray:
    """Flag ``name`` (``terminated`` or ``truncated``) as a ``(T, N)`` bool array.

    All False when the tensor is absent. A flag may be any dtype (a byte a row in some
    layouts); non-zero counts as set.
    """
    flags = tensors.get(name)
    if flags is None:
        return np.zeros((memory_size, num_envs), dtype=bool)
    return np.asarray(np.asarray(flags).reshape(memory_size, num_envs, -1).any(axis=2))


def done_flags(tensors: Mapping[str, Any], memory_size: int, num_envs: int) -> np.ndarray:
    """``terminated | truncated`` per row and env column, ``(T, N)`` bool (False where absent).

    Episodes are never stored: per env column, one ends at a row with either flag, so this
    is where every reader of episodes starts.
    """
    terminated = flag_rows(tensors, "terminated", memory_size, num_envs)
    return np.asarray(terminated | flag_rows(tensors, "truncated", memory_size, num_envs))


def overwritten_columns(
    state: CircularState,
    memory_size: int,
    num_envs: int,
    metadata: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """Per env column, whether rows of it were overwritten: a ``(N,)`` bool array.

    The one definition of "wrapped" that every episode count uses (a memory wrapped when
    any column did). The oldest row kept of such a column is not the first it got, so
    its first episode may have begun in a row that is gone and never counts as complete;
    every other episode that ends with a done flag does. Written row by row, column ``j``
    got ``written // N + (j < written % N)`` transitions and keeps the valid ones of its
    column (``chronological_rows``): it was overwritten when it got more.

    Without a recorded ``written`` (or one that the state contradicts, as when a caller
    moved the write head by hand), the state decides: not ``filled``, nothing was
    overwritten; ``filled`` with the head past row 0 of column 0, every column was (as
    far as anyone can tell); exactly at row 0, the memory counts as exactly full unless
    the collector's step count in ``metadata`` (``collector.steps``, transitions stored)
    exceeds the capacity, which only laps can explain.
    """
    envs = np.arange(num_envs, dtype=np.int64)
    ahead = (envs < state.env_index).astype(np.int64)
    kept = (
        np.full(num_envs, memory_size, dtype=np.int64)
        if state.filled
        else state.memory_index + ahead
    )
    written = state.written
    if written is not None and num_envs:
        got = written // num_envs + (envs < written % num_envs)
        if (got >= kept).all():
            return np.asarray(got > kept)
    if not state.filled:
        return np.zeros(num_envs, dtype=bool)
    if (state.memory_index, state.env_index) != (0, 0):
        return np.ones(num_envs, dtype=bool)
    collector = metadata.get("collector") if metadata is not None else None
    steps = collector.get("steps") if isinstance(collector, Mapping) else None
    laps = type(steps) is int and steps > memory_size * num_envs
    return np.full(num_envs, laps, dtype=bool)
