"""Format names and suffixes, and the dispatch of reads and writes to format modules.

Format modules are imported only when a file of their format is read or written, so that
``import expcli.formats`` never loads torch. Adding a format is one entry in ``_REGISTRY``.
The metadata codec that every format module shares is ``header``; telling a format from a
file's bytes is ``_sniffing``; a library error's gist is ``_error_summary``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from expcli.errors import ConfigError, FormatError, SchemaError, SourceNotFoundError
from expcli.formats._guards import check_source
from expcli.formats._manifest import has_manifest, is_folder_target
from expcli.formats._sniffing import SNIFF_BYTES, looks_like_text, sniff
from expcli.formats.dataset import Dataset
from expcli.spec import METADATA_KEY

__all__ = [
    "FOLDER_FORMAT",
    "FORMATS",
    "detect_format",
    "format_from_suffix",
    "open_lazy",
    "output_files",
    "read_dataset",
    "source_format",
    "write_dataset",
]


@dataclass(frozen=True, slots=True)
class _Entry:
    """A format: suffixes, what its files hold, and the module that reads and writes it."""

    suffixes: tuple[str, ...]
    holds: str
    module: str
    compresses: bool = False  # whether its writer takes a ``compression`` option


_REGISTRY: dict[str, _Entry] = {
    "pt": _Entry((".pt", ".pth"), "a torch.save zip archive", "expcli.formats.pt_format"),
    "npz": _Entry((".npz",), "a zip archive of .npy members", "expcli.formats.npz_format"),
    "csv": _Entry((".csv",), "comma-separated text", "expcli.formats.csv_format"),
    "hdf5": _Entry((".h5", ".hdf5"), "an HDF5 file", "expcli.formats.hdf5_format", True),
    # A folder: named by no suffix (or being one), so not among the file FORMATS.
    "folder": _Entry((), "a sharded dataset folder", "expcli.formats.sharded"),
}

FORMATS: tuple[str, ...] = tuple(n for n, e in _REGISTRY.items() if e.suffixes)
"""Names of the formats that can be read and written."""

FOLDER_FORMAT = "minari"
"""What ``source_format`` calls a folder: a Minari dataset, the one layout kept in folders."""

_EXPECTED = ", ".join(FORMATS)
_DESCRIBED = ", ".join(f"{name} ({_REGISTRY[name].holds})" for name in FORMATS)


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
    printable text whose first line is a header of ``NAME.INDEX`` columns is ``csv``.

    Raises:
        FormatError: The file is empty, not a regular file (a named pipe, a device), or
            neither its bytes nor its suffix name a format.
        OSError: The file cannot be opened.
    """
    check_source(path)
    if os.path.isdir(path):
        return source_format(path)  # the one place that tells folders apart
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    if not head:
        raise FormatError(f"file is empty; expected a dataset ({_EXPECTED})", path=path)
    found = sniff(Path(path), head) or format_from_suffix(path)
    if found is None:
        what = (
            "text that is not a CSV dataset (its first line is not a header of NAME.INDEX columns)"
            if looks_like_text(head)
            else "unrecognised content"
        )
        raise FormatError(f"{what}; expected a dataset: {_DESCRIBED}", path=path)
    return found


def source_format(path: str | os.PathLike[str], format: str | None = None) -> str:
    """The format of a dataset to read.

    ``"folder"`` for a sharded dataset folder (one holding a ``manifest.json``, which reading
    it then checks),
    ``FOLDER_FORMAT`` for another folder, else ``format`` (checked) or what ``detect_format`` tells.
    "File or folder?" is decided here only.

    Raises:
        SourceNotFoundError: No such file or folder.
        FormatError: Not a regular file or folder, an unknown ``format``, or a file whose
            format cannot be told.
        OSError: The file cannot be opened.
    """
    check_source(path)
    if not os.path.exists(path):
        raise SourceNotFoundError(path)
    if os.path.isdir(path):
        return "folder" if has_manifest(path) else FOLDER_FORMAT
    return _normalise(format, path) if format is not None else detect_format(path)


def read_dataset(
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    num_envs: int | None = None,
) -> Dataset:
    """Read a dataset file of any supported format.

    Args:
        path: File to read, or a Minari dataset folder.
        format: One of ``FORMATS``; by default the file's bytes tell, then its suffix.
            Ignored for a folder.
        num_envs: Number of env columns of a file that does not record it (a CSV without
            sidecar, such as skrl's export; default 1). Files that record it ignore it.

    Raises:
        SourceNotFoundError: No such file or folder (a ``FormatError`` and a
            ``FileNotFoundError``).
        FormatError: Unknown format, or an empty, corrupt, truncated or unsafe file, or a
            folder that is not a Minari dataset.
        SchemaError: The tensors disagree with each other or with the metadata.
        ConfigError: ``num_envs`` is less than 1.
        OSError: The file cannot be opened.
    """
    if num_envs is not None and num_envs < 1:
        raise ConfigError(f"num_envs must be at least 1, got {num_envs}")
    fmt = source_format(path, format)
    if fmt == FOLDER_FORMAT:
        from expcli.formats.layouts import read_minari_folder

        dataset = read_minari_folder(path)  # or says why the folder is not a Minari dataset
    else:
        dataset = _module(fmt).read(Path(path), num_envs=num_envs)
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
        found = format_from_suffix(target) or ("folder" if is_folder_target(target) else None)
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
    module = _module(fmt)
    dataset.validate(path)
    if METADATA_KEY in dataset.tensors:
        raise SchemaError("this name is reserved for the metadata", path=path, key=METADATA_KEY)
    module.write(dataset, target, overwrite=overwrite, **options)
    return target


def output_files(target: str | os.PathLike[str], format: str) -> tuple[Path, ...]:
    """The files that writing ``format`` to ``target`` makes.

    The target, and a CSV's metadata sidecar (``PATH.meta.json``).
    """
    path = Path(target)
    if format.lower().lstrip(".") == "csv":
        from expcli.formats.csv_format import sidecar_path

        return path, sidecar_path(path)
    return (path,)


def open_lazy(
    path: str | os.PathLike[str], format: str | None = None, *, num_envs: int | None = None
) -> tuple[Dataset, Callable[[], None]]:
    """Open a dataset whose tensors stay on disk where the format allows.

    npz members, HDF5 files, Minari folders, CSV rows: read by slices of rows; others are
    read whole.

    Args:
        path: File to read, or a Minari dataset folder.
        format: As ``read_dataset``.
        num_envs: As ``read_dataset``: for files that do not record it (CSV, D4RL).

    Returns:
        The dataset, and a function to call once done with it.

    Raises:
        FormatError, SchemaError, ConfigError: As ``read_dataset``.
    """
    if num_envs is not None and num_envs < 1:
        raise ConfigError(f"num_envs must be at least 1, got {num_envs}")
    fmt = source_format(path, format)
    if fmt == FOLDER_FORMAT:
        from expcli.formats.layouts import open_minari_folder

        opened: Any = open_minari_folder(path)
    else:
        opener = getattr(_module(fmt), "open_lazy", None)
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


def _normalise(format: str, path: str | os.PathLike[str]) -> str:
    name = format.lower().lstrip(".")
    if name not in _REGISTRY:
        raise FormatError(f"unknown format {format!r}; expected one of {_EXPECTED}", path=path)
    return name


def _module(fmt: str) -> _FormatModule:
    return cast(_FormatModule, importlib.import_module(_REGISTRY[fmt].module))
