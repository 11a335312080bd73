"""One place that turns library errors into one red line and an exit code."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import NoReturn, ParamSpec, TypeVar

import typer

from expcli.errors import ExpcliError

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["reports_errors"]


def reports_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Wrap a command: an ``ExpcliError`` becomes ``error: message`` on stderr and its exit
    code, any other ``OSError`` ``error: file: reason`` and exit 1; Ctrl-C exits 130.
    ``EXPCLI_DEBUG=1`` re-raises with the full traceback."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except ExpcliError as e:
            _report(str(e), e.exit_code)
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        except OSError as e:  # the system refused something expcli did not foresee
            where = f"{e.filename}: " if e.filename else ""
            _report(where + (e.strerror or str(e)), 1)

    return wrapper


def _report(message: str, exit_code: int) -> NoReturn:
    """Print ``error: message`` in red on stderr and exit (re-raise with EXPCLI_DEBUG=1)."""
    if os.environ.get("EXPCLI_DEBUG") == "1":
        raise
    from rich.markup import escape

    from expcli.cli._console import err_console

    err_console().print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(exit_code) from None
