"""One place that turns library errors into one red line and an exit code."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any, NoReturn, ParamSpec, TypeVar

import typer

from expcli import thread_pools
from expcli.errors import ExpcliError, printable

P = ParamSpec("P")
R = TypeVar("R")

__all__ = [
    "EXIT_BROKEN_PIPE",
    "quiet_closed_pipes",
    "reports_errors",
    "signals_end_at_once",
    "term_as_interrupt",
]

# The reader of the output went away (``expcli inspect FILE | head``): exit as a Unix tool
# killed by SIGPIPE is reported, 128 + 13, and print nothing.
EXIT_BROKEN_PIPE = 141


def reports_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command so that its errors reach the user as one line and an exit code.

    A warning (what a reader could not tell, say) is one ``warning: message`` line on stderr.
    An ``ExpcliError`` becomes ``error: message`` on stderr and its exit code, any other ``OSError``
    ``error: file: reason`` and exit 1; Ctrl-C exits 130; a closed output pipe exits
    ``EXIT_BROKEN_PIPE`` silently. ``EXPCLI_DEBUG=1`` re-raises with the full traceback.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            with warnings.catch_warnings():
                warnings.showwarning = _warning_line
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
    sys.unraisablehook = _interrupt_again(sys.unraisablehook)


def signals_end_at_once() -> None:
    """SIGINT and SIGTERM end the process at once from now on (the command is done).

    A ``KeyboardInterrupt`` raised while Python shuts down can stop the shutdown of a
    thread pool half-way, leaving the interpreter waiting for its thread forever; and one
    raised as a pool started a thread may have left it unknown to Python's own stop, so the
    shared pools are told to stop here (``thread_pools``).
    """
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
    thread_pools.shut_down()


def _interrupt(signum: int, frame: object) -> None:
    del signum, frame
    raise KeyboardInterrupt


def _interrupt_again(hook: Callable[[Any], Any]) -> Callable[[Any], None]:
    """An ``unraisablehook`` that sends Ctrl-C again when Python swallowed one.

    A signal's ``KeyboardInterrupt`` raised in a weak reference's callback or a ``__del__``
    (run by the garbage collector wherever it runs) is printed and dropped: the write it
    should stop would go on. The signal is sent to the main thread again, shortly, to be
    raised where it can be.
    """

    def handle(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt):
            main = threading.main_thread().ident
            assert main is not None
            later = threading.Timer(0.005, signal.pthread_kill, (main, signal.SIGINT))
            later.daemon = True
            later.start()
            return
        hook(unraisable)

    return handle


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


def _warning_line(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` as one yellow ``warning: message`` line on stderr."""
    del category, filename, lineno, file, line
    from rich.markup import escape

    from expcli.cli._console import err_console

    text = escape(printable(str(message)))
    err_console().print(f"[yellow]warning:[/yellow] {text}", soft_wrap=True, highlight=False)


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
