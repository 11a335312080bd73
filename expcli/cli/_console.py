"""The two rich consoles: results to stdout, progress and errors to stderr.

Both raise ``BrokenPipeError`` when the reader of their pipe has gone (``expcli inspect
FILE | head``), where rich's own consoles would exit 1: the command wrapper
(``_errors.reports_errors``) then exits quietly with ``EXIT_BROKEN_PIPE``.
"""

from __future__ import annotations

import errno
import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def out_console() -> Console:
    """Where results go (stdout)."""
    return _console_class()()


def err_console() -> Console:
    """Where progress, logs and errors go (stderr)."""
    return _console_class()(stderr=True)


@functools.cache
def _console_class() -> type[Console]:
    from rich.console import Console

    class PipeConsole(Console):
        """A rich console that reports a closed pipe instead of exiting."""

        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "the reader of the output has gone")

    return PipeConsole
