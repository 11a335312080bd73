"""One place that turns library errors into one red line and an exit code."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar

import typer

from expcli.errors import ExpcliError

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["EXIT_BROKEN_PIPE", "quiet_closed_pipes", "reports_errors", "term_as_interrupt"]

# The reader of the output went away (``expcli inspect FILE | head``): exit as a Unix tool
# killed by SIGPIPE is reported, 128 + 13, and print nothing.
EXIT_BROKEN_PIPE = 141


def reports_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command so that its errors reach the user as one line and an exit code.

    An ``ExpcliError`` becomes ``error: message`` on stderr and its exit code, any other ``OSError``
    ``error: file: reason`` and exit 1; Ctrl-C exits 130; a closed output pipe exits
    ``EXIT_BROKEN_PIPE`` silently. ``EXPCLI_DEBUG=1`` re-raises with the full traceback.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except BrokenPipeError:
            quiet_closed_pipes()
            raise typer.Exit(EXIT_BROKEN_PIPE) from None
        except ExpcliError as e:
            _report(str(e), e.exit_code)
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        except OSError as e:  # the system refused something expcli did not foresee
            where = f"{e.filename}: " if e.filename else ""
            _report(where + (e.strerror or str(e)), 1)

    return wrapper


def term_as_interrupt() -> None:
    """Take SIGTERM as Ctrl-C from now on: ``KeyboardInterrupt``, so writes clean up.

    Each signal raises anew, as Ctrl-C does: a second one ends a clean-up that hangs.
    Nothing changes where SIGTERM already has a handler (an embedding program's) or off the
    main thread. ``collect`` puts its own handlers over this one while it runs.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: object) -> None:
    del signum, frame
    raise KeyboardInterrupt


def quiet_closed_pipes() -> None:
    """Point stdout and stderr at /dev/null.

    Nothing left in their buffers (flushed at exit) then raises again or prints Python's
    "Exception ignored" note.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (AttributeError, OSError, ValueError):
                pass  # not a real file (a test runner's capture): nothing to flush later
    finally:
        os.close(devnull)


def _report(message: str, exit_code: int) -> NoReturn:
    """Print ``error: message`` in red on stderr and exit (re-raise with EXPCLI_DEBUG=1)."""
    if os.environ.get("EXPCLI_DEBUG") == "1":
        raise
    from rich.markup import escape

    from expcli.cli._console import err_console

    try:
        err_console().print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    except BrokenPipeError:
        quiet_closed_pipes()
    raise typer.Exit(exit_code) from None
