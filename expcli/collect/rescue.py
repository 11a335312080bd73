"""Where collected data goes when the output cannot be written: saved elsewhere, or kept.

A run's rows are never dropped because the output failed: an in-memory run is saved in
the same format to the system's temporary folder (or the current one), and the error
says where.
"""

from __future__ import annotations

import os
from pathlib import Path

from expcli.errors import OutputError
from expcli.formats.dataset import Dataset

__all__ = ["save_elsewhere", "unused_name", "with_note"]


def save_elsewhere(
    dataset: Dataset, output: Path, compression: str | None, error: OutputError
) -> OutputError:
    """Save ``dataset`` to the first fallback folder that takes it; the error to raise."""
    import tempfile

    from expcli.conversion import save

    tried: list[str] = []
    for folder in dict.fromkeys(Path(f).resolve() for f in (tempfile.gettempdir(), os.curdir)):
        if folder == output.parent.resolve():
            continue
        path = unused_name(folder, output)
        try:
            save(dataset, path, overwrite=False, compression=compression)
        except OutputError:
            tried.append(str(folder))
            continue
        note = f"the {len(dataset):,} transitions collected were saved to {path} instead"
        return with_note(error, note, path)
    note = f"saving what was collected to {' or '.join(tried) or 'another folder'} failed too"
    return with_note(error, note, None)


def unused_name(folder: Path, output: Path, suffix: str | None = None) -> Path:
    """A free ``folder/NAME-rescued.SUFFIX`` to save a failed run to.

    The output's suffix unless ``suffix`` is given, numbered if the name is taken (a CSV's sidecar
    included).
    """
    end = output.suffix if suffix is None else suffix
    k = 0
    while True:
        path = folder / f"{output.stem}-rescued{f'-{k}' if k else ''}{end}"
        if not any(os.path.lexists(f"{path}{extra}") for extra in ("", ".meta.json")):
            return path
        k += 1


def with_note(error: OutputError, note: str, saved_to: Path | None) -> OutputError:
    """The same output error with ``note`` added to its message and ``saved_to`` set."""
    assert error.path is not None
    return OutputError(
        f"{error.message}; {note}",
        path=error.path,
        errno=error.errno,
        needed=error.needed,
        free=error.free,
        saved_to=saved_to,
    )
