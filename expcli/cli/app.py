"""The Typer application, its global options and the entry point."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from expcli._version import __version__
from expcli.cli._help import PlainHelpCommand, PlainHelpGroup

app = typer.Typer(
    name="expcli",
    help="Collect, inspect and convert reinforcement-learning experience datasets.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    cls=PlainHelpGroup,
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


def _register() -> None:
    from expcli.cli.collect_cmd import collect_cmd
    from expcli.cli.convert_cmd import convert_cmd
    from expcli.cli.envs_cmd import envs_cmd
    from expcli.cli.inspect_cmd import inspect_cmd
    from expcli.cli.sample_cmd import sample_cmd
    from expcli.cli.shape_cmds import filter_cmd, merge_cmd, split_cmd

    app.command("collect", cls=PlainHelpCommand)(collect_cmd)
    app.command("convert", cls=PlainHelpCommand)(convert_cmd)
    app.command("envs", cls=PlainHelpCommand)(envs_cmd)
    app.command("inspect", cls=PlainHelpCommand)(inspect_cmd)
    app.command("sample", cls=PlainHelpCommand)(sample_cmd)
    app.command("merge", cls=PlainHelpCommand)(merge_cmd)
    app.command("split", cls=PlainHelpCommand)(split_cmd)
    app.command("filter", cls=PlainHelpCommand)(filter_cmd)


_register()


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
