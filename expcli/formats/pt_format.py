"""PyTorch ``.pt`` files: a dict name -> tensor (what skrl saves) plus the metadata string.

Reading uses ``torch.load(weights_only=True)``, which refuses any pickle that would run
code, and memory-maps the tensors of zip-format files so that large files load lazily.
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import numpy as np
import torch

from expcli.errors import FormatError, SchemaError
from expcli.formats._atomic import atomic_write
from expcli.formats.dataset import Dataset
from expcli.formats.registry import (
    dataset_from_header,
    encode_header,
    error_summary,
    foreign_dataset,
    parse_header,
)
from expcli.spec import METADATA_KEY, SUPPORTED_DTYPES

__all__ = ["read", "write"]

_ZIP_MAGIC = b"PK"
_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"
_NUMPY_NAMES = {
    getattr(torch, name): name
    for name in SUPPORTED_DTYPES
    if isinstance(getattr(torch, name, None), torch.dtype)
}


def write(dataset: Dataset, path: Path, *, overwrite: bool) -> None:
    """Save the tensors (sharing memory with the arrays) and the metadata with ``torch.save``."""
    payload: dict[str, torch.Tensor | str] = {}
    storages: dict[int, torch.dtype] = {}
    for name in sorted(dataset.tensors):
        tensor = _to_tensor(dataset.tensors[name])
        # torch.save refuses two dtypes over one address (even empty arrays can share one).
        address = tensor.untyped_storage().data_ptr()
        if tensor.numel() == 0 or storages.setdefault(address, tensor.dtype) != tensor.dtype:
            tensor = tensor.clone()
        payload[name] = tensor
    payload[METADATA_KEY] = encode_header(dataset.header(), path)
    with atomic_write(path, overwrite=overwrite) as f:
        torch.save(payload, f)


def read(path: Path, *, num_envs: int | None = None) -> Dataset:
    """Load a ``.pt`` file safely; a file without metadata is read as a full skrl memory.

    Args:
        path: File to read.
        num_envs: Unused: a ``.pt`` file records its tensors' shapes.

    Raises:
        FormatError: The file is not a PyTorch file, is corrupt or truncated, would run code
            when unpickled, or holds something other than a dict of tensors.
        SchemaError: A tensor has an unsupported dtype or disagrees with the metadata.
    """
    del num_envs
    obj = _load(path)
    if not isinstance(obj, dict):
        raise FormatError(
            f"holds a {type(obj).__name__}; expected a dict of tensors (name -> tensor)",
            path=path,
        )
    arrays: dict[str, np.ndarray] = {}
    text: str | None = None
    for key, value in obj.items():
        if not isinstance(key, str):
            raise FormatError(f"has a key {key!r}; expected tensor names (strings)", path=path)
        if key == METADATA_KEY:
            if not isinstance(value, str):
                raise FormatError(
                    f"holds a {type(value).__name__}; expected the metadata JSON string",
                    path=path,
                    key=key,
                )
            text = value
        elif isinstance(value, torch.Tensor):
            arrays[key] = _to_numpy(value, path, key)
        else:
            raise FormatError(
                f"holds a {type(value).__name__}; expected a tensor", path=path, key=key
            )
    if text is None:
        return foreign_dataset(arrays, path)
    return dataset_from_header(arrays, parse_header(text, path, METADATA_KEY), path)


def _load(path: Path) -> object:
    """``torch.load`` with pickles that run code refused and every failure a FormatError."""
    with open(path, "rb") as f:
        head = f.read(len(_LEGACY_MAGIC))
    is_zip = head.startswith(_ZIP_MAGIC)
    if not (is_zip or head.startswith(_LEGACY_MAGIC)):
        what = "the file is empty" if not head else "unrecognised content"
        raise FormatError(
            f"not a PyTorch file ({what}); expected a zip archive written by torch.save",
            path=path,
        )
    try:
        with warnings.catch_warnings():
            # torch warns about odd pickle protocols before failing; the error says enough.
            warnings.filterwarnings("ignore", category=UserWarning, module="torch.serialization")
            return _torch_load(path, is_zip)
    except pickle.UnpicklingError as e:
        raise FormatError(
            f"refused to unpickle ({error_summary(e)}); only tensors, strings and containers "
            f"of them are loaded, and nothing in the file was run",
            path=path,
        ) from e
    except MemoryError:
        raise
    except Exception as e:  # torch's readers raise many types for corrupt input
        raise FormatError(
            f"corrupt or truncated PyTorch file ({error_summary(e)})", path=path
        ) from e


def _torch_load(path: Path, is_zip: bool) -> object:
    """Memory-map zip-format files, falling back to reading them where mmap fails."""
    if not is_zip:
        return torch.load(path, map_location="cpu", weights_only=True)
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (RuntimeError, OSError):
        # mmap is not available everywhere; a corrupt file fails again here.
        return torch.load(path, map_location="cpu", weights_only=True, mmap=False)


def _to_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor sharing the array's memory (copied only if strided backwards or byte-swapped)."""
    array = np.asarray(array)  # a LazyRows tensor is read whole: .pt needs whole tensors
    native = np.ascontiguousarray(array.astype(array.dtype.newbyteorder("="), copy=False))
    with warnings.catch_warnings():
        # torch.save only reads the tensor; a read-only source array is fine.
        warnings.filterwarnings("ignore", "The given NumPy array is not writable", UserWarning)
        return torch.from_numpy(native)


def _to_numpy(tensor: torch.Tensor, path: Path, key: str) -> np.ndarray:
    name = _NUMPY_NAMES.get(tensor.dtype)
    if name is None or tensor.layout != torch.strided:
        raise SchemaError(
            f"tensor of dtype {tensor.dtype} and layout {tensor.layout} is not supported; "
            f"expected a dense tensor of one of {', '.join(sorted(SUPPORTED_DTYPES))}",
            path=path,
            key=key,
        )
    return tensor.detach().resolve_conj().resolve_neg().numpy()
