"""A Memory's files: where ``save`` writes (skrl's export layout or any path) and the write.

What goes into a file is ``Memory.to_dataset()``, and what comes out of one becomes a
memory with ``Memory.from_dataset()``; the formats themselves live in ``expcli.formats``,
which never imports the memory (``Dataset`` is imported here for typing only).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from expcli.errors import InvalidValueError
from expcli.formats.rows import Layout
from expcli.formats.table import layout_named

if TYPE_CHECKING:
    from expcli.formats.dataset import Dataset

__all__ = ["EXPORT_FORMATS", "check_export_format", "save_dataset"]

EXPORT_FORMATS = layout_named(Layout.SKRL).formats  # skrl's exports: pt, npz, csv


def check_export_format(format: str) -> None:
    """Refuse a format skrl's exports do not use.

    Raises:
        InvalidValueError: Not one of pt, npz, csv.
    """
    if format not in EXPORT_FORMATS:
        raise InvalidValueError(
            f"Unsupported export format: {format!r}; expected one of {EXPORT_FORMATS}"
        )


def save_dataset(
    dataset: Callable[[], Dataset],
    directory: str | os.PathLike[str],
    format: str | None,
    label: str,
) -> str:
    """Write ``dataset()`` atomically under the output lock; its path.

    A ``directory`` that ends in a format's suffix is the file itself; any other is a
    folder, and the file goes to ``<directory>/memories/<timestamp>_memory_<label>.<format>``
    as skrl's exports do. ``dataset`` is called once the lock is held.

    Raises:
        InvalidValueError: The format is not one of pt, npz, csv, or contradicts the suffix.
        SchemaError: A tensor's dtype cannot be stored (bfloat16, complex).
        OutputLockedError: Another process writes that file.
    """
    from expcli.files.output_lock import OutputLock
    from expcli.formats import format_from_suffix, write_dataset

    target = Path(directory)
    suffix = format_from_suffix(target)
    if suffix is not None and not target.is_dir():
        if format is not None and format != suffix:
            raise InvalidValueError(
                f"format {format!r} contradicts the file suffix of {str(target)!r}"
            )
        format = suffix
    else:
        format = format or "pt"
        check_export_format(format)
        stamp = datetime.datetime.now().strftime("%y-%m-%d_%H-%M-%S-%f")
        target = target / "memories" / f"{stamp}_memory_{label}.{format}"
    target.parent.mkdir(parents=True, exist_ok=True)
    with OutputLock(target):  # one writer of the file at a time, as every save
        return str(write_dataset(dataset(), target, format=format))
