"""PyTorch ``.pt`` files: a dict name -> tensor (what skrl saves) plus the metadata string.

Writing streams the tensors slice of rows by slice of rows into the zip archive that
``torch.save`` would write for that dict (same records, same pickle, same layout), so a
dataset read lazily from another file is never held in memory whole, and torch is not
imported. Reading uses ``torch.load(weights_only=True)``, which refuses any pickle that
would run code, and memory-maps the tensors of zip-format files so that large files load
lazily.
"""

from __future__ import annotations

import os
import pickle
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from expcli.errors import ExpcliError, FormatError, SchemaError
from expcli.files.atomic import atomic_write
from expcli.formats._error_summary import error_summary
from expcli.formats._guards import check_read_whole
from expcli.formats._pt_archive import PtArchiveWriter
from expcli.formats._pt_pickle import StoredTensor, dict_pickle
from expcli.formats.dataset import Dataset
from expcli.formats.frames import derive, encode
from expcli.formats.header import dataset_from_header, encode_header, foreign_dataset, parse_header
from expcli.formats.lazy import row_chunks
from expcli.formats.rows import WritePlan
from expcli.spec import METADATA_KEY, SUPPORTED_DTYPES

if TYPE_CHECKING:
    import torch

    from expcli.formats.block_cache import BlockCache

__all__ = ["open_lazy", "read", "write", "write_to"]

_ZIP_MAGIC = b"PK"
_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"
_UNMAPPED = (
    "a .pt file is mapped, not read, only in torch's zip format (torch.save since PyTorch "
    "1.6) on a file system that allows mmap"
)


def write(dataset: Dataset, plan: WritePlan) -> None:
    """Write the tensors, then the metadata string, as the one dict torch.save would write.

    Tensors go in name order, each streamed slice of rows by slice of rows. ``frames``:
    ``FramesForm.ONCE`` stores next observations once (``formats.frames``).
    """
    path = plan.target
    members, header = encode(dataset.tensors, dataset.header(), plan.frames, path)
    text = encode_header(header, path)
    with atomic_write(path, overwrite=plan.overwrite) as f:
        _write_members(members, f, text)


def write_stream(dataset: Dataset, out: IO[bytes], source: str | os.PathLike[str]) -> None:
    """Write ``dataset`` front to back to the binary stream ``out`` (``source``: messages)."""
    write_to(dataset, out, encode_header(dataset.header(), source))


def write_to(dataset: Dataset, file: IO[bytes], header: str | None) -> None:
    """Write the archive to an open ``file`` (a stream will do: the writer never seeks).

    With ``header`` (``encode_header``'s) as metadata; None writes the tensors alone (as
    skrl's ``Memory.save`` does).
    """
    _write_members(dataset.tensors, file, header)


def _write_members(members: Mapping[str, Any], file: IO[bytes], header: str | None) -> None:
    """``write_to`` of arrays of any shape: the tensors, or the members ``frames.encode`` made."""
    names = sorted(members)
    items: list[tuple[str, StoredTensor | str]] = []
    for name in names:
        array = members[name]
        items.append((name, StoredTensor(np.dtype(array.dtype), tuple(array.shape))))
    if header is not None:
        items.append((METADATA_KEY, header))
    archive = PtArchiveWriter(file)
    archive.write_pickle(dict_pickle(items))
    for key, name in enumerate(names):  # storage i is the i-th tensor of the pickle
        array = members[name]
        with archive.storage(str(key), array.nbytes) as record:
            for part in _little_endian_bytes(array):
                record.write(part)
    archive.close()


def _little_endian_bytes(array: Any) -> Iterator[memoryview]:
    """A tensor's bytes in row-major order, little-endian, slice of rows by slice of rows.

    A slice of a lazily read tensor is read from its file only now.
    """
    little = np.dtype(array.dtype).newbyteorder("<")
    if array.ndim == 0 or array.size == 0:
        parts: Iterator[Any] = iter([np.asarray(array)])
    else:
        chunks = row_chunks(array)
        parts = (array[start : start + chunks.step] for start in chunks)
    for part in parts:
        yield np.ascontiguousarray(part, dtype=little).reshape(-1).view(np.uint8).data


def read(path: Path, *, num_envs: int | None = None) -> Dataset:
    """Load a ``.pt`` file safely; a file without metadata is read as a full skrl memory.

    Args:
        path: File to read.
        num_envs: Unused: a ``.pt`` file records its tensors' shapes.

    Raises:
        FormatError: The file is not a PyTorch file, is corrupt or truncated, would run code
            when unpickled, or holds something other than a dict of tensors.
        SchemaError: A tensor has an unsupported dtype or disagrees with the metadata.
        ConfigError: A file that cannot be mapped (torch's legacy format) is larger than
            the memory available (said before reading it).
    """
    dataset, close = open_lazy(path)
    derived = [a for a in dataset.tensors.values() if not isinstance(a, np.ndarray)]
    check_read_whole(sum(a.nbytes for a in derived), path)
    held = {name: np.asarray(array) for name, array in dataset.tensors.items()}
    return Dataset(held, dataset.state, dataset.metadata)


def open_lazy(
    path: Path, *, num_envs: int | None = None, cache: BlockCache | None = None
) -> tuple[Dataset, Callable[[], None]]:
    """Like ``read``, but next observations stored once stay ``DerivedRows``.

    The other tensors are mapped (or read) as ``read`` does; nothing is left to close.

    Raises:
        FormatError, SchemaError, ConfigError: As ``read``.
    """
    del num_envs, cache  # the file records its shape; nothing decoded is kept
    import torch

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
        return foreign_dataset(arrays, path), _nothing
    header = parse_header(text, path, METADATA_KEY)
    return dataset_from_header(derive(arrays, header, path), header, path), _nothing


def _nothing() -> None:
    """The closer of a ``.pt`` file: its maps go when their arrays do."""


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
    except (MemoryError, ExpcliError):
        raise
    except Exception as e:  # torch's readers raise many types for corrupt input
        raise FormatError(
            f"corrupt or truncated PyTorch file ({error_summary(e)})", path=path
        ) from e


def _torch_load(path: Path, is_zip: bool) -> object:
    """Memory-map zip-format files, falling back to reading them where mmap fails.

    A file read, not mapped, is held whole: about its size, which must fit in memory first.
    """
    import torch

    if not is_zip:
        check_read_whole(path.stat().st_size, path, _UNMAPPED)
        return torch.load(path, map_location="cpu", weights_only=True)
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except (RuntimeError, OSError):
        # mmap is not available everywhere; a corrupt file fails again here.
        check_read_whole(path.stat().st_size, path, _UNMAPPED)
        return torch.load(path, map_location="cpu", weights_only=True, mmap=False)


def _to_numpy(tensor: torch.Tensor, path: Path, key: str) -> np.ndarray:
    import torch

    numpy_names = {getattr(torch, name): name for name in SUPPORTED_DTYPES}
    name = numpy_names.get(tensor.dtype)
    if name is None or tensor.layout != torch.strided:
        raise SchemaError(
            f"tensor of dtype {tensor.dtype} and layout {tensor.layout} is not supported; "
            f"expected a dense tensor of one of {', '.join(sorted(SUPPORTED_DTYPES))}",
            path=path,
            key=key,
        )
    if tensor.device.type != "cpu":
        raise FormatError(
            f"is a tensor on the {tensor.device.type} device, which holds no data; expected "
            "a tensor with its data in the file",
            path=path,
            key=key,
        )
    stored = tensor.untyped_storage().nbytes()
    if tensor.numel() * tensor.element_size() > stored:
        raise FormatError(
            f"declares {tensor.numel():,} values of shape {tuple(tensor.shape)} over {stored:,} "
            "bytes of data: its strides repeat the same data (an expanded or overlapping "
            "view); expected a tensor that holds its values",
            path=path,
            key=key,
        )
    return tensor.detach().resolve_conj().resolve_neg().numpy()
