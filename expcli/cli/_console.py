"""The two rich consoles: results to stdout, progress and errors to stderr.

Both raise ``BrokenPipeError`` when the reader of their pipe has gone (``expcli inspect
FILE | head``), where rich's own consoles would exit 1: the command wrapper
(``_errors.reports_errors``) then exits quietly with ``EXIT_BROKEN_PIPE``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import ProgressColumn

BarUpdate = Callable[[float, str], None]
"""Moves a progress bar: how much is done (of its total), and what is being done."""


def out_console() -> Console:
    """Where results go (stdout).

    No ``:name:`` emoji codes: text such as ``0:100:2`` is printed as it is (markup is
    escaped where text is built from user input or data).
    """
    return _console_class()(emoji=False)


def err_console() -> Console:
    """Where progress, logs and errors go (stderr), without emoji codes (as ``out_console``)."""
    return _console_class()(stderr=True, emoji=False)


def bar_columns(*fields: ProgressColumn) -> tuple[ProgressColumn, ...]:
    """How every expcli bar reads: what, the bar, percentage, ``fields``, elapsed, ETA.

    Percentage and ETA come from the task's total; a task without one shows a pulsing bar
    and ``-:--:--``.
    """
    from rich.progress import (
        BarColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        *fields,
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )


@contextlib.contextmanager
def file_progress(
    path: Path, description: str, *, min_bytes: int, total: float = 1.0
) -> Iterator[BarUpdate | None]:
    """A transient progress bar on stderr while a large dataset (file or folder) is worked on.

    The bar shows from the start, before the first byte is read. Datasets under
    ``min_bytes`` get no bar: ``None`` is given instead, so the caller passes no progress
    callback at all.
    """
    if dataset_bytes(path) < min_bytes:
        yield None
        return
    from rich.progress import Progress

    with Progress(*bar_columns(), console=err_console(), transient=True) as bar:
        task = bar.add_task(description, total=total)

        def update(done: float, what: str) -> None:
            bar.update(task, completed=done, description=what)

        yield update


def phases_on(bar: BarUpdate) -> Callable[[str, float], None]:
    """A library's progress (a phase, its fraction done) on a bar of total 2.

    The read phase fills the first half; any other (write, verify, a split's parts) the second.
    """

    def progress(phase: str, done: float) -> None:
        bar((0.0 if phase == "read" else 1.0) + done, phase)

    return progress


def dataset_bytes(path: Path) -> int:
    """Size of a dataset file, or of every file in a dataset folder; 0 for what is not there."""
    try:
        if path.is_file():
            return path.stat().st_size
        if path.is_dir():
            return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    except OSError:
        pass  # the read that follows reports it
    return 0


@functools.cache
def _console_class() -> type[Console]:
    from rich.console import Console

    class PipeConsole(Console):
        """A rich console that reports a closed pipe instead of exiting."""

        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "the reader of the output has gone")

    return PipeConsole
