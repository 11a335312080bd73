"""Format names, suffixes, sniffing, and the dispatch of reads and writes to format modules.

Format modules are imported only when a file of their format is read or written, so that
``import expcli.formats`` never loads torch. Adding a format is one entry in ``_REGISTRY``.
This module also holds the metadata codec that every format module shares.
"""

from __future__ import annotations

import codecs
import importlib
import json
import os
import re
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from expcli.errors import ConfigError, FormatError, SchemaError
from expcli.formats._guards import brief, check_source, load_json
from expcli.formats._skrl_tail import written_transitions
from expcli.formats.dataset import Dataset
from expcli.spec import METADATA_KEY, SUPPORTED_DTYPES, CircularState, TensorSpec

__all__ = [
    "FORMATS",
    "dataset_from_header",
    "detect_format",
    "encode_header",
    "error_summary",
    "foreign_dataset",
    "format_from_suffix",
    "header_specs",
    "open_lazy",
    "parse_header",
    "read_dataset",
    "write_dataset",
]


@dataclass(frozen=True, slots=True)
class _Entry:
    """A format: suffixes, what its files hold, and the module that reads and writes it."""

    suffixes: tuple[str, ...]
    holds: str
    module: str | None  # None: recognised, but not supported yet
    compresses: bool = False  # whether its writer takes a ``compression`` option


_REGISTRY: dict[str, _Entry] = {
    "pt": _Entry((".pt", ".pth"), "a torch.save zip archive", "expcli.formats.pt_format"),
    "npz": _Entry((".npz",), "a zip archive of .npy members", "expcli.formats.npz_format"),
    "csv": _Entry((".csv",), "comma-separated text", "expcli.formats.csv_format"),
    "hdf5": _Entry((".h5", ".hdf5"), "an HDF5 file", "expcli.formats.hdf5_format", True),
    # A folder: named by no suffix (or being one), so not among the file FORMATS.
    "folder": _Entry((), "a sharded dataset folder", "expcli.formats.sharded"),
}

FORMATS: tuple[str, ...] = tuple(n for n, e in _REGISTRY.items() if e.module and e.suffixes)
"""Names of the formats that can be read and written."""

_EXPECTED = ", ".join(FORMATS)
_DESCRIBED = ", ".join(f"{name} ({_REGISTRY[name].holds})" for name in FORMATS)
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_TORCH_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"  # pickled magic number
_SNIFF_BYTES = 64 * 1024
_CSV_HEADER_FIELD = re.compile(r"[^,]+\.\d+")
_ADVICE = re.compile(r"weights_only|Weights only load failed|documentation of torch\.load")


class _FormatModule(Protocol):
    def read(self, path: Path, *, num_envs: int | None = None) -> Dataset: ...

    def write(self, dataset: Dataset, path: Path, *, overwrite: bool, **options: Any) -> None: ...


def format_from_suffix(path: str | os.PathLike[str]) -> str | None:
    """The format that the file name's suffix stands for (case-insensitive), or None."""
    suffix = Path(path).suffix.lower()
    return next((name for name, e in _REGISTRY.items() if suffix in e.suffixes), None)


def detect_format(path: str | os.PathLike[str]) -> str:
    """The format of a file, told by its bytes first and by its suffix when they do not tell.

    Zip archives holding a ``data.pkl`` are ``pt`` (as is torch's legacy pickle format),
    zip archives of ``.npy`` members are ``npz``, the HDF5 signature is ``hdf5``, and
    printable text that looks comma-separated is ``csv``.

    Raises:
        FormatError: The file is empty, not a regular file (a named pipe, a device), or
            neither its bytes nor its suffix name a format.
        OSError: The file cannot be opened.
    """
    check_source(path)
    if os.path.isdir(path):
        return str(_folder_format(path))
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
    if not head:
        raise FormatError(f"file is empty; expected a dataset ({_EXPECTED})", path=path)
    found = _sniff(Path(path), head) or format_from_suffix(path)
    if found is None:
        raise FormatError(f"unrecognised content; expected a dataset: {_DESCRIBED}", path=path)
    return found


def read_dataset(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    num_envs: int | None = None,
) -> Dataset:
    """Read a dataset file of any supported format.

    Args:
        path: File to read.
        format: One of ``FORMATS``; by default the file's bytes tell, then its suffix.
        num_envs: Number of env columns of a file that does not record it (a CSV without
            sidecar, such as skrl's export; default 1). Files that record it ignore it.

    Raises:
        FormatError: Unknown format, or an empty, corrupt, truncated or unsafe file.
        SchemaError: The tensors disagree with each other or with the metadata.
        ConfigError: ``num_envs`` is less than 1.
        OSError: The file cannot be opened.
    """
    if num_envs is not None and num_envs < 1:
        raise ConfigError(f"num_envs must be at least 1, got {num_envs}")
    check_source(path)
    fmt = _normalise(format, path) if format is not None else detect_format(path)
    dataset = _module(fmt, path).read(Path(path), num_envs=num_envs)
    dataset.validate(path)
    return dataset


def write_dataset(
    dataset: Dataset,
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    overwrite: bool = True,
    compression: str | None = None,
) -> Path:
    """Write a dataset atomically: the target is either the complete new file or untouched.

    Args:
        dataset: What to write; validated first.
        path: Target file (a CSV also gets a ``PATH.meta.json`` sidecar).
        format: One of ``FORMATS``; by default the suffix of ``path`` tells.
        overwrite: Whether an existing file may be replaced.
        compression: ``"gzip"`` or ``"lzf"`` for HDF5; None or ``"none"`` (the default)
            for no compression, the only choice for the other formats.

    Returns:
        The path written.

    Raises:
        FormatError: The format is unknown or cannot be told from the suffix.
        SchemaError: The dataset is inconsistent, uses a reserved name or its metadata is
            not JSON-serialisable.
        OutputExistsError: The file exists and ``overwrite`` is false.
        ConfigError: An unknown compression, or one the format cannot take.
        OSError: The folder does not exist or cannot be written.
    """
    target = Path(path)
    if format is not None:
        fmt = _normalise(format, path)
    else:
        found = format_from_suffix(target) or _folder_format(target, writing=True)
        if found is None:
            raise FormatError(
                f"cannot tell the format from the suffix {target.suffix!r}; "
                f"pass a format, one of {_EXPECTED}",
                path=path,
            )
        fmt = found
    options: dict[str, Any] = {}
    if _REGISTRY[fmt].compresses:
        options["compression"] = compression
    elif compression is not None and compression.lower() != "none":
        compressing = ", ".join(name for name in FORMATS if _REGISTRY[name].compresses)
        raise ConfigError(
            f"{fmt} files cannot be compressed (got compression {compression!r}); "
            f"compression is for {compressing}"
        )
    module = _module(fmt, path)
    dataset.validate(path)
    if METADATA_KEY in dataset.tensors:
        raise SchemaError("this name is reserved for the metadata", path=path, key=METADATA_KEY)
    module.write(dataset, target, overwrite=overwrite, **options)
    return target


def open_lazy(
    path: str | os.PathLike[str], format: str | None = None, *, num_envs: int | None = None
) -> tuple[Dataset, Callable[[], None]]:
    """Open a dataset whose tensors stay on disk where the format allows (npz members,
    expcli HDF5 files, CSV rows), read by slices of rows; others are read whole.

    Args:
        path: File to read.
        format: As ``read_dataset``.
        num_envs: As ``read_dataset``: for files that do not record it (CSV, D4RL).

    Returns:
        The dataset, and a function to call once done with it.

    Raises:
        FormatError, SchemaError, ConfigError: As ``read_dataset``.
    """
    if num_envs is not None and num_envs < 1:
        raise ConfigError(f"num_envs must be at least 1, got {num_envs}")
    check_source(path)
    fmt = _normalise(format, path) if format is not None else detect_format(path)
    opener = getattr(_module(fmt, path), "open_lazy", None)
    if opener is None:
        return read_dataset(path, fmt, num_envs=num_envs), lambda: None
    opened = opener(Path(path), num_envs=num_envs)
    dataset, close = opened if isinstance(opened, tuple) else (opened, lambda: None)
    try:
        dataset.validate(path)
    except BaseException:
        close()
        raise
    return dataset, close


def encode_header(
    header: Mapping[str, Any], path: str | os.PathLike[str], *, indent: int | None = None
) -> str:
    """A metadata object (``Dataset.header()``, perhaps with more keys) as a JSON string.

    Raises:
        SchemaError: A metadata value is not JSON-serialisable (its key is named).
    """
    try:
        return json.dumps(header, indent=indent)
    except (TypeError, ValueError) as e:
        key = next((k for k, v in header.items() if not _serialisable(v)), None)
        raise SchemaError(f"metadata is not JSON-serialisable: {e}", path=path, key=key) from e


def parse_header(text: str | bytes, path: str | os.PathLike[str], key: str) -> dict[str, Any]:
    """Parse a stored metadata JSON object.

    Raises:
        FormatError: The text is not a JSON object, or is nested too deep.
    """
    header = load_json(text, path, key)
    if not isinstance(header, dict):
        raise FormatError(
            f"metadata is a JSON {type(header).__name__}; expected an object", path=path, key=key
        )
    return header


def header_specs(header: Mapping[str, Any], path: str | os.PathLike[str]) -> list[TensorSpec]:
    """The tensor specs listed under ``tensors`` in a metadata object, in name order.

    Raises:
        SchemaError: ``tensors`` is missing or malformed, or names an unsupported dtype.
    """
    tensors = header.get("tensors")
    if not isinstance(tensors, dict):
        raise SchemaError("metadata lacks a 'tensors' object", path=path, key="tensors")
    specs = []
    for name in sorted(tensors):
        entry = tensors[name]
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        shape = entry.get("shape") if isinstance(entry, dict) else None
        if (
            not isinstance(dtype, str)
            or dtype not in SUPPORTED_DTYPES
            or not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape))
        ):
            raise SchemaError(
                f"malformed tensor entry {brief(entry)} in metadata; expected "
                f'{{"dtype": one of {sorted(SUPPORTED_DTYPES)}, "shape": [sizes]}}',
                path=path,
                key=name,
            )
        specs.append(TensorSpec(name, str(dtype), tuple(shape)))
    return specs


def dataset_from_header(
    arrays: dict[str, np.ndarray], header: Mapping[str, Any], path: str | os.PathLike[str]
) -> Dataset:
    """Build a dataset from stored arrays and their metadata object, checking they agree.

    Raises:
        SchemaError: The metadata is not expcli's schema or disagrees with the arrays.
    """
    state, metadata = Dataset.split_header(header, path)
    specs = {spec.name: spec for spec in header_specs(header, path)}
    for name in sorted(specs.keys() | arrays.keys()):
        if name not in arrays:
            raise SchemaError("listed in the metadata but missing", path=path, key=name)
        if name not in specs:
            raise SchemaError("present but not listed in the metadata", path=path, key=name)
        actual = TensorSpec.of(name, arrays[name])
        if (actual.dtype, actual.shape) != (specs[name].dtype, specs[name].shape):
            raise SchemaError(
                f"stored as {actual.dtype} with feature shape {actual.shape}; the metadata "
                f"says {specs[name].dtype} with feature shape {specs[name].shape}",
                path=path,
                key=name,
            )
    dataset = Dataset(arrays, state, metadata)
    if arrays:
        for key, actual_size in (
            ("memory_size", dataset.memory_size),
            ("num_envs", dataset.num_envs),
        ):
            if header.get(key) != actual_size:
                raise SchemaError(
                    f"metadata says {header.get(key)!r}; the tensors have {actual_size}",
                    path=path,
                    key=key,
                )
    dataset.validate(path)
    return dataset


def foreign_dataset(arrays: dict[str, Any], path: str | os.PathLike[str]) -> Dataset:
    """A dataset from arrays without metadata: a skrl export (``Memory.save``).

    It counts as a full memory, unless it ends with transitions that skrl never wrote (NaN
    in every float tensor, zero in the others: see ``_skrl_tail``); then only the written
    ones are valid, and the metadata says how many were left out, under
    ``skrl.unwritten_transitions``.
    """
    dataset = Dataset(arrays, CircularState(0, 0, filled=True), {})
    dataset.validate(path)
    size, envs = dataset.memory_size, dataset.num_envs
    written = written_transitions(arrays, size, envs)
    if written < size * envs:
        state = CircularState(written // envs, written % envs, False)
        unwritten = {"unwritten_transitions": size * envs - written}
        dataset = Dataset(arrays, state, {"layout": "skrl", "skrl": unwritten})
    return dataset


def error_summary(error: BaseException) -> str:
    """A library error's gist for a one-line message: its first informative sentence.

    Lines of advice (such as torch's suggestion to retry with ``weights_only=False``) are
    skipped; so are ANSI colours and a trailing full stop.
    """
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    useful = [line for line in lines if not _ADVICE.search(line)] or lines or [""]
    line = useful[0].removeprefix("WeightsUnpickler error:").strip()
    first = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0].strip().rstrip(".")
    return first or type(error).__name__


def _folder_format(path: str | os.PathLike[str], *, writing: bool = False) -> Any:
    """``"folder"`` for a sharded dataset folder (or, to write, a name without suffix)."""
    from expcli.formats._manifest import is_sharded_folder

    if is_sharded_folder(path) or (writing and not Path(path).suffix):
        return "folder"
    if writing:
        return None
    raise FormatError(
        "is a folder without an expcli manifest.json; expected a dataset file or a sharded "
        "dataset folder",
        path=path,
    )


def _normalise(format: str, path: str | os.PathLike[str]) -> str:
    name = format.lower().lstrip(".")
    if name not in _REGISTRY:
        raise FormatError(f"unknown format {format!r}; expected one of {_EXPECTED}", path=path)
    return name


def _module(fmt: str, path: str | os.PathLike[str]) -> _FormatModule:
    module = _REGISTRY[fmt].module
    if module is None:
        raise FormatError(
            f"{fmt.upper()} support is not available yet; expected one of {_EXPECTED}",
            path=path,
        )
    return cast(_FormatModule, importlib.import_module(module))


def _sniff(path: Path, head: bytes) -> str | None:
    """The format the first bytes of a file show, or None."""
    if head.startswith(_ZIP_MAGICS):
        return _sniff_zip(path, head)
    if head.startswith(_HDF5_MAGIC):
        return "hdf5"
    if head.startswith(_TORCH_LEGACY_MAGIC):
        return "pt"
    return "csv" if _looks_like_csv(head) else None


def _sniff_zip(path: Path, head: bytes) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except Exception:  # sniffing is best effort; the reader reports what is wrong
        # Truncated: the member list at the end is gone; the first member's name is not.
        names = [_first_member(head)] if len(head) >= 30 else []
        names = [n for n in names if n]
        if not names:
            return None
    if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
        return "pt"
    if all(n.endswith(".npy") for n in names):
        return "npz"
    return None


def _first_member(head: bytes) -> str:
    """Name of the first member in a zip local file header (torch writes data.pkl first)."""
    length = int.from_bytes(head[26:28], "little")
    return head[30 : 30 + length].decode("utf-8", errors="replace")


_LINE_BREAKS_AND_TABS = str.maketrans("", "", "\r\n\t")


def _looks_like_csv(head: bytes) -> bool:
    """Printable UTF-8 text with commas, or a one-column skrl-style header (``name.0``)."""
    if b"\x00" in head:
        return False
    try:
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    if not text.translate(_LINE_BREAKS_AND_TABS).isprintable():  # one C call, not one per char
        return False
    first_line = text.split("\n", 1)[0].rstrip("\r")
    return "," in text or _CSV_HEADER_FIELD.fullmatch(first_line) is not None


def _serialisable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
