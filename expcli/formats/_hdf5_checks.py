"""Checks that keep ``hdf5_format`` safe: what an HDF5 file declares is checked before reading.

Opening translates h5py's errors into FormatError; the datasets are listed by hard links
only (soft and external links are never followed); every dataset is checked against the
metadata, against the others' ``(T, N)`` and against the bytes the file really stores, so
that a damaged or hostile file cannot make a reader allocate what it does not hold.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from expcli.errors import ExpcliError, FormatError, InvalidValueError, SchemaError
from expcli.formats._error_summary import error_summary
from expcli.formats._guards import check_inflation
from expcli.formats._hdf5_heap import read_attribute
from expcli.spec import SUPPORTED_DTYPES, CircularState, TensorSpec

__all__ = [
    "ATTRIBUTE",
    "as_format_errors",
    "check_all_stored",
    "check_datasets",
    "check_names",
    "check_size",
    "check_stored",
    "check_written",
    "dataset_names",
    "header_text",
    "list_datasets",
    "native_dtype",
    "open_file",
]

ATTRIBUTE = "expcli"
"""Name of the root attribute holding the metadata JSON."""

_MAX_RATIO = 1100  # deflate expands at most ~1032:1; a larger claim is not real data
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_METADATA_CACHE = (1 << 20, 2 << 20)  # HDF5's metadata cache: initial and largest size
_MAGIC_OFFSETS = (0, 512, 1024, 2048, 4096)  # after a user block, the signature moves


def open_file(path: Path, cache_bytes: int) -> Any:
    """``h5py.File(path, "r")`` with every failure but a missing file a FormatError."""
    with open(path, "rb") as f:
        head = f.read(_MAGIC_OFFSETS[-1] + len(_HDF5_MAGIC))
    if not head:
        raise FormatError("not an HDF5 file (the file is empty)", path=path)
    try:
        file = h5py.File(path, "r", rdcc_nbytes=cache_bytes, locking=False)
    except MemoryError:
        raise
    except Exception as e:  # OSError mostly; h5py raises others for odd files
        if not any(head.startswith(_HDF5_MAGIC, at) for at in _MAGIC_OFFSETS):
            raise FormatError(
                "not an HDF5 file (unrecognised content); expected the HDF5 signature",
                path=path,
            ) from e
        raise FormatError(f"corrupt or truncated HDF5 file ({error_summary(e)})", path=path) from e
    _bound_metadata_cache(file)
    return file


def _bound_metadata_cache(file: Any) -> None:
    """Keep HDF5's cache of object headers and chunk indexes small.

    By default it grows to 32 MB (several times that in memory) as a file of thousands of
    datasets (a Minari file of many episodes) is read, and it holds nothing a sequential
    read needs again.
    """
    initial, largest = _METADATA_CACHE
    with contextlib.suppress(Exception):  # only a bound on memory: reading works without it
        config = file.id.get_mdc_config()
        config.set_initial_size = True
        config.initial_size = initial
        config.min_size = initial
        config.max_size = largest
        file.id.set_mdc_config(config)


def header_text(file: Any, path: Path) -> str | bytes | None:
    """The metadata JSON held by the root attribute, or None when there is no such attribute.

    Raises:
        FormatError: The attribute cannot be read, declares more than metadata can be (its
            size, its global heap: see ``_hdf5_heap``), or is not a string.
    """
    value = read_attribute(file, ATTRIBUTE, path, ATTRIBUTE)
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "SUO":
        value = value[()]
    if not isinstance(value, str | bytes):
        raise FormatError(
            f"root attribute holds {type(value).__name__}; expected the metadata JSON string",
            path=path,
            key=ATTRIBUTE,
        )
    return value


def list_datasets(file: Any, path: Path) -> dict[str, Any]:
    """Every dataset reachable by hard links, by full path, in name order."""
    found: dict[str, Any] = {}
    _visit_datasets(file, path, found.__setitem__)
    return dict(sorted(found.items()))


def dataset_names(file: Any, path: Path) -> list[str]:
    """The full paths of every dataset reachable by hard links, in name order.

    Names only: an open dataset holds tens of KB in HDF5, too much for a file of many
    episodes.
    """
    found: list[str] = []
    _visit_datasets(file, path, lambda name, _: found.append(name))
    return sorted(found)


def _visit_datasets(file: Any, path: Path, each: Callable[[str, Any], None]) -> None:
    def visit(name: str | bytes, item: Any) -> None:
        if not isinstance(name, str):  # h5py hands over names that are not UTF-8 as bytes
            raise InvalidValueError(f"the object name {name!r} is not UTF-8 text")
        if isinstance(item, h5py.Dataset):
            each(name, item)

    try:
        file.visititems(visit)
    except MemoryError:
        raise
    except Exception as e:
        raise FormatError(
            f"cannot list the datasets ({error_summary(e)}); the file is corrupt", path=path
        ) from e


def native_dtype(dataset: Any) -> np.dtype[Any]:
    """The dataset's dtype in native byte order (bool for h5py's FALSE/TRUE enum)."""
    dtype: np.dtype[Any] = dataset.dtype
    return dtype.newbyteorder("=") if dtype.byteorder not in "|=" else dtype


def check_names(names: list[str], path: Path) -> None:
    """Tensor names must be HDF5 paths that do not step into one another.

    Raises:
        SchemaError: A name has empty or ``.`` parts or a NUL, or names another's group.
    """
    known = set(names)
    for name in names:
        parts = name.split("/")
        if "\x00" in name or any(part in ("", ".") for part in parts):
            raise SchemaError(
                "cannot be an HDF5 dataset name: '/' separates groups, so a name may not be "
                "empty, start or end with '/', hold '//' or a '.' part, or hold a NUL",
                path=path,
                key=name,
            )
        for end in range(1, len(parts)):
            if (parent := "/".join(parts[:end])) in known:
                raise SchemaError(
                    f"lies under the tensor {parent!r}; in HDF5 '/' makes groups, and "
                    f"{parent!r} cannot be both a dataset and a group",
                    path=path,
                    key=name,
                )


def check_datasets(
    file: Any,
    path: Path,
    specs: list[TensorSpec],
    exact: Mapping[str, tuple[np.dtype[Any], tuple[int, ...]]] | None = None,
) -> dict[str, Any]:
    """The datasets by name, each checked against its spec and against the file's size.

    ``exact``: datasets of any shape besides the tensors (a next-observation tensor stored
    once: ``frames.sparse_members``), each with its dtype and whole shape.

    Raises:
        SchemaError: A dataset is missing, unlisted, or of another dtype or shape.
        FormatError: A dataset declares more data than the file stores, keeps its data in
            other files, or needs a filter that is not available.
    """
    found = list_datasets(file, path)
    wanted = {spec.name: spec for spec in specs}
    exact = exact or {}
    for name in sorted(wanted.keys() | found.keys() | exact.keys()):
        if name not in found:
            raise SchemaError("listed in the metadata but missing", path=path, key=name)
        if name not in wanted and name not in exact:
            raise SchemaError("present but not listed in the metadata", path=path, key=name)
        dataset = found[name]
        dtype, shape = _stored_type(dataset, path, name)
        if name in exact:
            matches = (dtype, shape) == exact[name]
            declared = f"{exact[name][0].name} shaped {exact[name][1]}"
        else:
            spec = wanted[name]
            matches = len(shape) >= 2 and (dtype.name, shape[2:]) == (spec.dtype, spec.shape)
            sizes = ", ".join(map(str, ("memory_size", "num_envs", *spec.shape)))
            declared = f"{spec.dtype} shaped ({sizes})"
        if not matches:
            raise SchemaError(
                f"stored as {dtype.name} shaped {shape}; the metadata says {declared}",
                path=path,
                key=name,
            )
        check_stored(dataset, path, name)
    return found


def _stored_type(dataset: Any, path: Path, name: str) -> tuple[np.dtype[Any], tuple[int, ...]]:
    """A dataset's dtype (native byte order) and shape.

    Raises:
        SchemaError: Its HDF5 type has no numpy match.
    """
    try:
        return native_dtype(dataset), tuple(int(d) for d in dataset.shape)
    except (TypeError, ValueError) as e:  # an HDF5 type numpy has no match for
        raise SchemaError(
            f"has an unsupported HDF5 type ({error_summary(e)}); expected one of "
            f"{', '.join(sorted(SUPPORTED_DTYPES))}",
            path=path,
            key=name,
        ) from e


def check_size(
    datasets: dict[str, Any], header: Mapping[str, Any], state: CircularState, path: Path
) -> tuple[int, int]:
    """``(T, N)`` shared by every dataset, matching the metadata and the circular state.

    Raises:
        SchemaError: The datasets disagree on ``(T, N)``, with the metadata's
            ``memory_size`` or ``num_envs``, or with the circular state.
    """
    size: tuple[int, int] | None = None
    for name, dataset in datasets.items():
        shape = tuple(int(d) for d in dataset.shape)
        if size is None:
            size = (shape[0], shape[1])
        elif shape[:2] != size:
            raise SchemaError(
                f"shape {shape} disagrees with (memory_size, num_envs) = {size} of the other "
                f"tensors",
                path=path,
                key=name,
            )
    if size is None:
        return 0, 0
    for key, actual in zip(("memory_size", "num_envs"), size, strict=True):
        if header.get(key) != actual:
            raise SchemaError(
                f"metadata says {header.get(key)!r}; the tensors have {actual}", path=path, key=key
            )
    try:
        state.check(*size)
    except ValueError as e:
        raise SchemaError(f"circular state does not fit the tensors: {e}", path=path) from e
    return size


def check_all_stored(file: Any, path: Path) -> list[str]:
    """Every dataset of a file without expcli's metadata, checked as ``check_stored`` does.

    Sparse ones allowed, so that a foreign layout reads only what the file holds. One
    dataset is open at a time.

    Returns:
        The datasets' full paths, as ``dataset_names``.

    Raises:
        FormatError: As ``dataset_names`` and ``check_stored``.
    """
    names = dataset_names(file, path)
    for name in names:
        try:
            item = file[name]
        except MemoryError:
            raise
        except Exception as e:
            raise FormatError(
                f"cannot open it ({error_summary(e)}); the file is corrupt", path=path, key=name
            ) from e
        check_stored(item, path, name, complete=False)
    return names


@contextlib.contextmanager
def as_format_errors(path: Path, what: str) -> Iterator[None]:
    """Turn what h5py raises for damaged objects, while ``what`` is read, into a FormatError."""
    try:
        yield
    except (ExpcliError, MemoryError):
        raise
    except (OSError, KeyError, ValueError, TypeError, RuntimeError) as e:
        raise FormatError(
            f"cannot read {what} ({error_summary(e)}); the file is corrupt", path=path
        ) from e


def check_written(dataset: Any, path: Path, name: str) -> None:
    """Refuse to finish a file in which rows of a tensor were never written.

    Raises:
        SchemaError: Some chunks of the dataset were never written.
    """
    if dataset.size and (_chunks_missing(dataset) or not dataset.id.get_storage_size()):
        raise SchemaError(
            "some rows were never written; expected every row of every tensor",
            path=path,
            key=name,
        )


def check_stored(dataset: Any, path: Path, name: str, *, complete: bool = True) -> None:
    """Refuse data kept in other files, missing filters, and sizes beyond what is stored.

    Args:
        dataset: An ``h5py.Dataset``.
        path: The file, for messages.
        name: The dataset's name, for messages.
        complete: Also refuse chunks that were never written (expcli writes every chunk;
            foreign files may legitimately be sparse).

    Raises:
        FormatError: The dataset's data is not all inside the file, needs a filter that is
            not available, or is declared larger than what the file stores.
    """
    try:
        plist = dataset.id.get_create_plist()
        elsewhere = plist.get_layout() == h5py.h5d.VIRTUAL or plist.get_external_count() > 0
        filters = [plist.get_filter(i) for i in range(plist.get_nfilters())]
        shape = dataset.shape  # None for HDF5's null dataspace, which holds nothing
        size = 0 if shape is None else math.prod(int(d) for d in shape)
        nbytes = size * int(dataset.id.get_type().get_size())
        stored = int(dataset.id.get_storage_size())
        missing = complete and nbytes > 0 and not elsewhere and _chunks_missing(dataset)
    except MemoryError:
        raise
    except Exception as e:
        raise FormatError(
            f"cannot inspect its storage ({error_summary(e)}); the file is corrupt",
            path=path,
            key=name,
        ) from e
    if elsewhere:
        raise FormatError(
            "keeps its data in other files (external or virtual dataset); expected the data "
            "inside this file",
            path=path,
            key=name,
        )
    for code, _flags, _values, label in filters:
        if not h5py.h5z.filter_avail(code):
            raise FormatError(
                f"is compressed with filter {code} ({label.decode(errors='replace')}), which "
                f"is not available; expected none, gzip or lzf",
                path=path,
                key=name,
            )
    if nbytes > (stored * _MAX_RATIO if filters else stored) or missing:
        raise FormatError(
            f"declares {nbytes} bytes of data but the file stores {stored}; it is truncated "
            f"or damaged",
            path=path,
            key=name,
        )
    if filters:
        check_inflation(nbytes, stored, path, name)


def _chunks_missing(dataset: Any) -> bool:
    """Whether some chunks were never written (HDF5 would read them as fill values)."""
    if dataset.chunks is None:
        return False
    expected = math.prod(-(-s // c) for s, c in zip(dataset.shape, dataset.chunks, strict=True))
    return bool(dataset.id.get_num_chunks() != expected)
