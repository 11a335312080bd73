"""load, save and convert: datasets between files, formats and layouts.

Every write lands atomically: the data goes to a temporary file beside the target, is
optionally read back and checked, and only then renamed into place, so a failed or
interrupted conversion leaves no output (or, with ``overwrite``, the old file intact).
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ConfigError, FormatError, OutputExistsError, SchemaError
from expcli.formats import (
    detect_format,
    format_from_suffix,
    open_lazy,
    read_dataset,
    write_dataset,
)
from expcli.formats._atomic import fsync_dir
from expcli.formats.dataset import Dataset
from expcli.formats.lazy import row_chunks

__all__ = ["COMPRESSIONS", "LAYOUTS", "ConvertResult", "convert", "load", "save"]

LAYOUTS = ("expcli", "skrl", "tianshou", "minari", "d4rl")
COMPRESSIONS = ("none", "gzip", "lzf")

Progress = Callable[[str, float], None]
"""Called with a phase ("read", "write", "verify") and the fraction done (0 to 1)."""


@dataclass(frozen=True)
class ConvertResult:
    """What a conversion did, for the one-line summary."""

    src: Path
    dst: Path
    src_format: str
    dst_format: str
    layout: str
    tensors: int
    transitions: int
    bytes_read: int
    bytes_written: int
    seconds: float
    verified: bool


def load(
    path: str | os.PathLike[str], format: str | None = None, *, num_envs: int | None = None
) -> Dataset:
    """Read any dataset file expcli knows (foreign layouts included) as a ``Dataset``.

    ``num_envs``: env columns of a file that does not record them: a CSV without sidecar
    (skrl's export; rows ``t * num_envs + env``) or a D4RL file (equal blocks of rows, env by
    env). Default 1. Files that record it ignore it.

    Raises:
        FormatError: Unknown, corrupt, truncated or unsafe file.
        SchemaError: Tensors that disagree with each other or with the metadata.
    """
    source = Path(path)
    if not source.exists():
        raise FormatError("no such file or folder", path=source)
    if source.is_dir():
        return _load_folder(source)
    return read_dataset(source, format, num_envs=num_envs)


def save(
    data: Any,
    path: str | os.PathLike[str],
    format: str | None = None,
    *,
    overwrite: bool = True,
    compression: str | None = None,
    layout: str = "expcli",
    verify: bool = False,
) -> Path:
    """Write a ``Dataset`` or a ``Memory`` (anything with ``to_dataset()``) atomically.

    Args:
        data: What to write.
        path: Target file; its suffix names the format unless ``format`` does.
        format: pt, npz, csv or hdf5.
        overwrite: Replace an existing file.
        compression: none, gzip or lzf (HDF5 only).
        layout: expcli's own schema, or a foreign layout for other libraries to read.
        verify: Read the written file back and compare every tensor before renaming it
            into place.

    Raises:
        ConfigError: An unknown layout or compression, or one the format cannot take.
        OutputExistsError: The target exists and ``overwrite`` is false.
        FormatError, SchemaError: The data cannot be written in that format.
    """
    dataset = data.to_dataset() if hasattr(data, "to_dataset") else data
    if not isinstance(dataset, Dataset):
        raise ConfigError(f"expected a Dataset or a Memory, got {type(data).__name__}")
    target = Path(path)
    _check_options(layout, compression)
    if target.exists() and not overwrite:
        raise OutputExistsError(target)
    fmt = _target_format(target, format, layout)
    checksums = _checksums(dataset) if verify else None
    _write_then_rename(dataset, target, fmt, layout, compression, checksums)
    return target


def convert(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    to: str | None = None,
    compression: str | None = None,
    layout: str = "expcli",
    overwrite: bool = False,
    verify: bool = False,
    progress: Progress | None = None,
    num_envs: int | None = None,
) -> ConvertResult:
    """Convert a dataset file to another format or layout, losslessly.

    ``num_envs``: env columns of a source that does not record them (a CSV without
    sidecar, a D4RL file), as ``load`` takes it.

    Raises:
        ConfigError: An unknown format, layout or compression.
        OutputExistsError: ``dst`` exists and ``overwrite`` is false.
        FormatError, SchemaError: The source cannot be read or the target not written.
    """
    started = time.perf_counter()
    source, target = Path(src), Path(dst)
    _check_options(layout, compression)
    if target.exists() and not overwrite:
        raise OutputExistsError(target)
    if source.resolve() == target.resolve():
        raise ConfigError(f"source and destination are the same file: {source}")
    fmt = _target_format(target, to, layout)
    report = progress or (lambda phase, done: None)
    report("read", 0.0)
    close: Callable[[], None] = _nothing
    if source.is_dir():
        dataset, src_format = load(source), "minari"
    else:
        if not source.exists():
            raise FormatError("no such file or folder", path=source)
        src_format = detect_format(source)
        # streamed where the format allows
        dataset, close = open_lazy(source, src_format, num_envs=num_envs)
    try:
        report("read", 1.0)
        checksums = _checksums(dataset) if verify else None
        report("write", 0.0)
        _write_then_rename(dataset, target, fmt, layout, compression, checksums)
        report("write", 1.0)
    finally:
        close()
    return ConvertResult(
        source,
        target,
        src_format,
        fmt,
        layout,
        len(dataset.tensors),
        len(dataset),
        _size(source),
        _size(target),
        time.perf_counter() - started,
        verify and layout == "expcli",
    )


# ----------------------------------------------------------------- internals


def _nothing() -> None:
    return None


def _check_options(layout: str, compression: str | None) -> None:
    if layout not in LAYOUTS:
        raise ConfigError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    if compression is not None and compression not in COMPRESSIONS:
        raise ConfigError(
            f"unknown compression {compression!r}; expected one of {', '.join(COMPRESSIONS)}"
        )


def _target_format(target: Path, to: str | None, layout: str) -> str:
    if layout != "expcli":
        from expcli.formats.layouts import layout_format

        return layout_format(layout, target, to)
    fmt = to or format_from_suffix(target)
    if fmt is None:
        raise ConfigError(
            f"cannot tell the output format from {target.name!r}; name a suffix "
            "(.pt, .npz, .csv, .h5) or pass a format"
        )
    return fmt


def _write_then_rename(
    dataset: Dataset,
    target: Path,
    fmt: str,
    layout: str,
    compression: str | None,
    checksums: dict[str, str] | None,
) -> None:
    """Write beside the target under a temporary name, check, then rename into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if layout != "expcli":  # the layout writers are atomic themselves
        from expcli.formats.layouts import write_layout

        whole = {name: np.asarray(array) for name, array in dataset.tensors.items()}
        write_layout(
            Dataset(whole, dataset.state, dataset.metadata), target, layout, overwrite=True
        )
        return
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.partial")
    written: list[Path] = []
    try:
        write_dataset(dataset, partial, fmt, compression=compression)
        written = [partial] + ([_sidecar(partial)] if fmt == "csv" else [])
        if checksums is not None:
            _verify(partial, fmt, checksums)
        if fmt == "csv":
            os.replace(_sidecar(partial), _sidecar(target))
        os.replace(partial, target)
        fsync_dir(target.parent)
    except (FormatError, SchemaError) as e:
        _cleanup([*written, partial, _sidecar(partial)])
        if e.path != str(partial):
            raise
        raise type(e)(e.message, path=target, key=e.key) from e  # name the user's file
    except BaseException:
        _cleanup([*written, partial, _sidecar(partial)])
        raise


def _cleanup(paths: list[Path]) -> None:
    for path in paths:
        _remove(path)


def _verify(partial: Path, fmt: str, checksums: dict[str, str]) -> None:
    again, close = open_lazy(partial, fmt)
    try:
        for name, digest in checksums.items():
            if name not in again.tensors or _digest(again.tensors[name]) != digest:
                raise FormatError(
                    "verification failed: the written tensor differs from the source",
                    path=partial,
                    key=name,
                )
    finally:
        close()


def _checksums(dataset: Dataset) -> dict[str, str]:
    return {name: _digest(array) for name, array in dataset.tensors.items()}


def _digest(array: Any) -> str:
    """A checksum of dtype, shape and bytes, computed slice by slice."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{np.dtype(array.dtype).newbyteorder('=').str}{tuple(array.shape)}".encode())
    if array.ndim == 0 or array.size == 0:
        h.update(np.ascontiguousarray(array).tobytes())
        return h.hexdigest()
    chunks = row_chunks(array)
    for start in chunks:
        rows = np.asarray(array[start : start + chunks.step])
        h.update(np.ascontiguousarray(rows, dtype=rows.dtype.newbyteorder("=")).tobytes())
    return h.hexdigest()


def _load_folder(folder: Path) -> Dataset:
    from expcli.formats.layouts import read_minari_folder

    return read_minari_folder(folder)  # or says why the folder is not a Minari dataset


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size if path.exists() else 0


def _remove(path: Path) -> None:
    try:
        if path.is_dir():
            import shutil

            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass
