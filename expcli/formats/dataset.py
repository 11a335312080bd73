"""The interchange type between memories and files: numpy arrays plus metadata.

``formats`` never imports torch-side code: a ``Memory`` hands over zero-copy numpy views
of its tensors as a ``Dataset``, and readers hand back a ``Dataset`` that a ``Memory``
adopts. Converting between file formats therefore never needs the memory at all.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from expcli._version import __version__
from expcli.errors import SchemaError
from expcli.formats._guards import check_read_whole
from expcli.spec import FRAMES_SCHEMA, SCHEMA, SUPPORTED_DTYPES, CircularState, TensorSpec

__all__ = ["Dataset", "read_whole"]

# Keys of the metadata object that the Dataset owns; everything else is user metadata.
_OWN_KEYS = frozenset(
    {
        "schema",
        "expcli_version",
        "created",
        "num_envs",
        "memory_size",
        "memory_index",
        "env_index",
        "filled",
        "written",
        "tensors",
        "frames",
    }
)


@dataclass
class Dataset:
    """Named tensors shaped ``(T, N, *feature)``, their circular state and metadata.

    Attributes:
        tensors: Name to numpy array, every array with the same first two dimensions.
        state: Circular state of the memory that wrote the data.
        metadata: Free-form JSON-serialisable metadata (env id, spaces, seeds, collector).
    """

    tensors: dict[str, np.ndarray]
    state: CircularState = field(default_factory=CircularState)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def memory_size(self) -> int:
        """Rows (``T``) of every tensor; 0 for a dataset without tensors."""
        first = next(iter(self.tensors.values()), None)
        return int(first.shape[0]) if first is not None else 0

    @property
    def num_envs(self) -> int:
        """Columns (``N``) of every tensor; 0 for a dataset without tensors."""
        first = next(iter(self.tensors.values()), None)
        return int(first.shape[1]) if first is not None else 0

    def __len__(self) -> int:
        """Number of valid transitions, as ``len(memory)``."""
        return self.state.valid_length(self.memory_size, self.num_envs)

    def structured(self, name: str) -> Any:
        """The tensors stored under ``name``, nested as its space is.

        ``observations``, ``next_observations`` and ``actions`` of a Dict (Tuple) space are
        stored one tensor per leaf (``observations/pos``...); this gives them back as a
        dict (tuple) of ``(T, N, *leaf_shape)`` arrays, nested as the space in the
        metadata, with ``Text`` leaves decoded to string arrays ``(T, N)``. For any other
        space it is the tensor itself; without a space in the metadata the nesting comes
        from the names (``infos/...`` gives a dict).

        Raises:
            SchemaError: Nothing is stored under ``name``, or a leaf is missing.
        """
        from expcli.space_json import structured

        return structured(self.metadata, self.tensors, name)

    def specs(self) -> list[TensorSpec]:
        """One spec per tensor, in name order."""
        return [TensorSpec.of(name, self.tensors[name]) for name in sorted(self.tensors)]

    def validate(self, path: str | os.PathLike[str] | None = None) -> None:
        """Check shapes, dtypes and circular state agree.

        Raises:
            SchemaError: A tensor is not at least 2-D, the tensors disagree on ``(T, N)``,
                a dtype is unsupported, or the circular state lies outside the tensors.
        """
        size: tuple[int, int] | None = None
        for name, array in self.tensors.items():
            if array.ndim < 2:
                raise SchemaError(
                    f"expected a tensor shaped (memory_size, num_envs, ...), got shape "
                    f"{tuple(array.shape)}",
                    path=path,
                    key=name,
                )
            if size is None:
                size = (int(array.shape[0]), int(array.shape[1]))
            elif tuple(array.shape[:2]) != size:
                raise SchemaError(
                    f"shape {tuple(array.shape)} disagrees with (memory_size, num_envs) = "
                    f"{size} of the other tensors",
                    path=path,
                    key=name,
                )
            if array.dtype.name not in SUPPORTED_DTYPES:
                raise SchemaError(
                    f"dtype {array.dtype.name} is not supported; expected one of "
                    f"{', '.join(sorted(SUPPORTED_DTYPES))}",
                    path=path,
                    key=name,
                )
        if size is not None:
            try:
                self.state.check(*size)
            except ValueError as e:
                raise SchemaError(f"circular state does not fit the tensors: {e}", path=path) from e

    def header(self) -> dict[str, Any]:
        """The metadata object written to files: schema keys first, then user metadata."""
        created = self.metadata.get("created") or datetime.datetime.now(datetime.UTC).isoformat(
            timespec="seconds"
        )
        own: dict[str, Any] = {
            "schema": SCHEMA,
            "expcli_version": __version__,
            "created": created,
            "num_envs": self.num_envs,
            "memory_size": self.memory_size,
            **self.state.to_json(),
            "tensors": {spec.name: spec.to_json() for spec in self.specs()},
        }
        extra = {k: v for k, v in self.metadata.items() if k not in _OWN_KEYS}
        return {**own, **extra}

    @staticmethod
    def split_header(
        header: Mapping[str, Any], path: str | os.PathLike[str] | None = None
    ) -> tuple[CircularState, dict[str, Any]]:
        """Split a metadata object read from a file into circular state and user metadata.

        Raises:
            SchemaError: The object is not expcli's schema or its circular state is malformed.
        """
        schema = header.get("schema")
        if schema not in (SCHEMA, FRAMES_SCHEMA):
            raise SchemaError(
                f"unknown schema {schema!r}; expected {SCHEMA!r} or {FRAMES_SCHEMA!r}", path=path
            )
        try:
            state = CircularState.from_json(header)
        except (KeyError, TypeError) as e:
            raise SchemaError(f"malformed circular state in metadata: {e}", path=path) from e
        metadata = {k: v for k, v in header.items() if k not in _OWN_KEYS or k == "created"}
        return state, metadata


def read_whole(opened: tuple[Dataset, Callable[[], None]], path: str | os.PathLike[str]) -> Dataset:
    """A dataset opened lazily (``opened``), read into memory, then closed.

    Raises:
        ConfigError: The memory available cannot hold it (said before any of it is read).
    """
    lazy, close = opened
    try:
        check_read_whole(sum(a.nbytes for a in lazy.tensors.values()), path)
        tensors = {name: np.asarray(array) for name, array in lazy.tensors.items()}
    finally:
        close()
    return Dataset(tensors, lazy.state, lazy.metadata)
