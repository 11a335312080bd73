"""Where collected data goes when the output cannot be written: saved elsewhere, or kept.

A run's rows are never dropped because the output failed: an in-memory run is saved in
the same format to the system's temporary folder (or the current one), and the error
says where.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from expcli.errors import OutputError
from expcli.formats.dataset import Dataset
from expcli.formats.rows import WritePlan

__all__ = ["save_elsewhere", "unused_name", "with_note"]


def save_elsewhere(dataset: Dataset, plan: WritePlan, error: OutputError) -> OutputError:
    """Save ``dataset`` as ``plan`` says, to the first fallback folder that takes it.

    Each fallback is a new file (``unused_name``) in the same format, compression and form.

    Returns:
        The error to raise: ``error`` with a note saying where the data went.
    """
    import tempfile

    from expcli.formats.checked_write import check_target, write_checked

    output = plan.target
    tried: list[str] = []
    for folder in dict.fromkeys(Path(f).resolve() for f in (tempfile.gettempdir(), os.curdir)):
        if folder == output.parent.resolve():
            continue
        path = unused_name(folder, output)
        elsewhere = dataclasses.replace(plan, target=path, overwrite=False)
        try:
            check_target(elsewhere)
            write_checked(dataset, elsewhere, None)
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
