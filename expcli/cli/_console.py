"""The two rich consoles: results to stdout, progress and errors to stderr.

Both raise ``BrokenPipeError`` when the reader of their pipe has gone (``expcli inspect
FILE | head``), where rich's own consoles would exit 1: the command wrapper
(``_errors.reports_errors``) then exits quietly with ``EXIT_BROKEN_PIPE``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import ProgressColumn

BarUpdate = Callable[[float, str], None]
"""Moves a progress bar: how much is done (of its total), and what is being done."""

PROGRESS_SECONDS = "EXPCLI_PROGRESS_SECONDS"
"""Environment variable: seconds between two progress lines when stderr is not a terminal."""

_DEFAULT_SECONDS = 10.0


def progress_seconds() -> float:
    """Seconds between two progress lines off a terminal (``EXPCLI_PROGRESS_SECONDS``, 10)."""
    try:
        seconds = float(os.environ.get(PROGRESS_SECONDS, _DEFAULT_SECONDS))
    except ValueError:
        return _DEFAULT_SECONDS
    return seconds if math.isfinite(seconds) and seconds >= 0 else _DEFAULT_SECONDS


class ProgressLog:
    """Progress as plain lines on stderr, for a log: a run under nohup, Slurm or CI.

    Where a terminal shows a bar, a log gets one line every ``progress_seconds()`` (and a last
    one when the work ends), written whole: never cut to a width, never redrawn.

    Args:
        what: The line's first word (``collect``, ``converting``).
        clock: Seconds, for the intervals and the ETA (``time.monotonic``).
    """

    def __init__(self, what: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.clock = clock
        self.started = clock()
        self.every = progress_seconds()
        self.last = self.started
        self.pending: str | None = None
        self.printed = False  # a work shorter than the interval prints no line at all

    def update(self, fraction: float | None, details: str) -> None:
        """Note the progress; print a line when the interval has passed since the last one.

        ``fraction``: of the work done (0 to 1), for the percentage and the ETA; None when
        the total is unknown. ``details``: what else the line says (steps, rate, episodes).
        """
        now = self.clock()
        self.pending = self._line(fraction, details, now)
        if now - self.last >= self.every:
            self._print()
            self.last = now

    def close(self) -> None:
        """Print the last progress noted, unless it was printed already or none was.

        A work shorter than the interval leaves no line: its result (or its one-line
        error) says all there is.
        """
        if self.printed:
            self._print()

    def _print(self) -> None:
        if self.pending is not None:
            sys.stderr.write(self.pending + "\n")
            sys.stderr.flush()
            self.pending = None
            self.printed = True

    def _line(self, fraction: float | None, details: str, now: float) -> str:
        elapsed = now - self.started
        parts = [self.what]
        if fraction is not None:
            parts.append(f"{min(max(fraction, 0.0), 1.0):.0%}")
        if details:
            parts.append(details)
        parts.append(f"elapsed {_clock(elapsed)}")
        if fraction is not None and 0 < fraction < 1:
            parts.append(f"ETA {_clock(elapsed * (1 - fraction) / fraction)}")
        return ", ".join(parts[:2]) + (", " + ", ".join(parts[2:]) if parts[2:] else "")


def _clock(seconds: float) -> str:
    """``0:01:05``: seconds as hours, minutes and seconds."""
    whole = int(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


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
    callback at all. When stderr is not a terminal, a ``ProgressLog`` writes a plain line
    every ``progress_seconds()`` instead (a log reads them; a bar would show nothing).
    """
    if dataset_bytes(path) < min_bytes:
        yield None
        return
    console = err_console()
    if not console.is_terminal:  # a log: a plain line every so often, never a bar
        log = ProgressLog(description)

        def log_update(done: float, what: str) -> None:
            log.update(done / total if total else None, what if what != description else "")

        try:
            yield log_update
        finally:
            log.close()
        return
    from rich.progress import Progress

    with Progress(*bar_columns(), console=console, transient=True) as bar:
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
    """Size of a dataset file, of every file in a dataset folder, or of a glob's files; or 0."""
    from expcli.errors import ExpcliError
    from expcli.formats.parquet_sources import source_size

    try:
        found = source_size(path)  # a glob
        if found is not None:
            return found
        if path.is_file():
            return path.stat().st_size
        if path.is_dir():
            return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    except (OSError, ExpcliError):
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
