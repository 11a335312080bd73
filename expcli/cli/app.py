"""The Typer application, its global options and the entry point."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
from typer import _click
from typer.main import get_command_from_info

from expcli._version import __version__
from expcli.cli._help import PlainHelpCommand, PlainHelpGroup

COMMANDS: dict[str, tuple[str, str]] = {
    "collect": ("collect_cmd", "collect_cmd"),
    "convert": ("convert_cmd", "convert_cmd"),
    "envs": ("envs_cmd", "envs_cmd"),
    "inspect": ("inspect_cmd", "inspect_cmd"),
    "sample": ("sample_cmd", "sample_cmd"),
    "merge": ("shape_cmds", "merge_cmd"),
    "split": ("shape_cmds", "split_cmd"),
    "filter": ("shape_cmds", "filter_cmd"),
}
"""The commands, in the order help lists them: name -> (module of ``expcli.cli``, function)."""


class _LazyCommands(MutableMapping[str, _click.Command]):
    """The group's commands, each imported and built by Typer when first looked up.

    A run imports only its own command's module (``expcli collect`` never loads what
    ``inspect`` or ``sample`` need) and Typer builds only that command's parameters;
    ``--help`` looks up every command, so its page is what registering them all gives.
    """

    def __init__(self, markup: Any) -> None:
        self._markup = markup
        self._built: dict[str, _click.Command] = {}
        self._added: dict[str, _click.Command] = {}  # add_command's, after the table's

    def __getitem__(self, name: str) -> _click.Command:
        command = self._added.get(name) or self._built.get(name)
        if command is None:
            module, function = COMMANDS[name]
            callback = getattr(importlib.import_module(f"expcli.cli.{module}"), function)
            scratch = typer.Typer()  # the CommandInfo that app.command(...) would register
            scratch.command(name, cls=PlainHelpCommand)(callback)
            [info] = scratch.registered_commands
            command = self._built[name] = get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=self._markup,
            )
        return command

    def __setitem__(self, name: str, command: _click.Command) -> None:
        self._added[name] = command

    def __delitem__(self, name: str) -> None:
        del self._added[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (name for name in self._added if name not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS.keys() | self._added.keys())


class _LazyGroup(PlainHelpGroup):
    """The ``expcli`` group over ``_LazyCommands``."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands(self.rich_markup_mode)


app = typer.Typer(
    name="expcli",
    help="Collect, inspect and convert reinforcement-learning experience datasets.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    cls=_LazyGroup,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"expcli {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Collect, inspect and convert reinforcement-learning experience datasets."""


def main() -> None:
    """Entry point of the ``expcli`` console script and of ``python -m expcli``.

    SIGTERM (what ``timeout``, systemd and Slurm send) is taken as Ctrl-C in every command:
    a write in progress removes its temporary file and lock, and the command exits 130.
    Once the command is done (its output complete), a signal ends the process at once:
    raised while Python shuts down, it would stop the shutdown half-way and hang it.
    Output left in stdout's buffer is flushed here, so that a reader that has gone is met
    by the quiet ``EXIT_BROKEN_PIPE`` as in every command, not by a note at exit.
    """
    from expcli.cli._errors import (
        EXIT_BROKEN_PIPE,
        quiet_closed_pipes,
        signals_end_at_once,
        term_as_interrupt,
    )

    term_as_interrupt()
    try:
        try:
            app(prog_name="expcli")
        finally:
            sys.stdout.flush()
            signals_end_at_once()
    except BrokenPipeError:
        quiet_closed_pipes()
        sys.exit(EXIT_BROKEN_PIPE)
