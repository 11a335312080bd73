"""``expcli envs``: a thin layer over ``expcli.envs.catalog.list_envs``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from expcli.cli._console import err_console, out_console
from expcli.cli._errors import reports_errors
from expcli.errors import quoted

if TYPE_CHECKING:
    from rich.table import Table

    from expcli.envs.catalog import EnvEntry
    from expcli.envs.envpool_catalog import EnvPoolEntry


@reports_errors
def envs_cmd(
    pattern: Annotated[
        str | None,
        typer.Argument(metavar="FILTER", help="Keep ids containing this text (case-insensitive)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a JSON list instead of a table.")
    ] = False,
    no_spaces: Annotated[
        bool,
        typer.Option("--no-spaces", help="List ids only: make no env (fast, nothing to install)."),
    ] = False,
    modules: Annotated[
        list[str] | None,
        typer.Option(
            "--module",
            "-m",
            help="Import a package that registers envs first (e.g. ale_py); repeatable.",
        ),
    ] = None,
    envpool: Annotated[
        bool,
        typer.Option(
            "--envpool", help="List EnvPool's ids instead (for --mode envpool; needs the extra)."
        ),
    ] = False,
) -> None:
    """List registered Gymnasium envs with their spaces, to find what to collect.

    Each matching env is made once to read its spaces, then closed; an env whose extra is
    not installed says what it needs and how to install it. With --envpool, EnvPool's ids
    are listed with the spaces expcli stores, read from their specs.
    """
    if envpool:
        _envpool_envs(pattern, as_json=as_json, spaces=not no_spaces)
        return
    from expcli.envs.catalog import list_envs

    with err_console().status("reading the Gymnasium registry", spinner="dots"):
        entries = list_envs(pattern, spaces=not no_spaces, modules=modules or ())
    if as_json:
        typer.echo(json.dumps([entry.to_json() for entry in entries], indent=2))
        return
    if not entries:
        err_console().print(_no_match(pattern), soft_wrap=True, highlight=False, markup=False)
        return
    out_console().print(_table(entries, spaces=not no_spaces))
    made = [e for e in entries if e.status]
    usable = sum(e.status == "ok" for e in made)
    summary = f"{len(entries)} envs" + (f", {usable} ready to collect" if made else "")
    err_console().print(summary, highlight=False)


def _id_table(*, spaces: bool) -> Table:
    """A table with the id column, and the space columns when ``spaces``."""
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("id", overflow="fold", no_wrap=True)
    if spaces:
        table.add_column("observation space", no_wrap=True)
        table.add_column("action space", no_wrap=True)
    return table


def _table(entries: list[EnvEntry], *, spaces: bool) -> Table:
    from rich.text import Text

    table = _id_table(spaces=spaces)
    table.add_column("max steps", justify="right", no_wrap=True)
    table.add_column("vector", justify="center")
    if spaces and any(e.status != "ok" for e in entries):
        table.add_column("status", overflow="fold")
    elif not spaces:
        table.add_column("entry point", overflow="fold")
    for e in entries:
        row = [e.id]
        if spaces:
            row += [e.observation_space or "-", e.action_space or "-"]
        row += [str(e.max_episode_steps) if e.max_episode_steps else "-", "yes" if e.vector else ""]
        if len(table.columns) > len(row):
            row.append(e.status if spaces else e.entry_point)
        table.add_row(*(Text(cell) for cell in row))  # Text: "gymnasium[box2d]" is not markup
    return table


def _envpool_envs(pattern: str | None, *, as_json: bool, spaces: bool) -> None:
    from expcli.envs.envpool_catalog import list_envpool_envs

    with err_console().status("reading EnvPool's registry", spinner="dots"):
        entries = list_envpool_envs(pattern, spaces=spaces)
    if as_json:
        typer.echo(json.dumps([entry.to_json() for entry in entries], indent=2))
        return
    if not entries:
        err_console().print(
            f"EnvPool has no id containing {quoted(pattern or '')}", highlight=False, markup=False
        )
        return
    out_console().print(_envpool_table(entries, spaces=spaces))
    same = sum(e.gym_equivalent for e in entries)
    err_console().print(
        f"{len(entries)} EnvPool envs; {same} the env gym.make builds (auto may run them "
        "through EnvPool), the others run only with --mode envpool",
        highlight=False,
        soft_wrap=True,
    )


def _envpool_table(entries: list[EnvPoolEntry], *, spaces: bool) -> Table:
    from rich.text import Text

    table = _id_table(spaces=spaces)
    if spaces:
        table.add_column("max steps", justify="right", no_wrap=True)
        table.add_column("stack", justify="right", no_wrap=True)
    table.add_column("= gym.make", justify="center")
    table.add_column("family" if not spaces else "status", overflow="fold")
    for e in entries:
        row = [e.id]
        if spaces:
            row += [e.observation_space or "-", e.action_space or "-"]
            row += [str(e.max_episode_steps or "-"), str(e.frame_stack or "")]
        row += ["yes" if e.gym_equivalent else "", e.status if spaces else e.family]
        table.add_row(*(Text(cell) for cell in row))
    return table


def _no_match(pattern: str | None) -> str:
    from expcli.envs.env_ids import similar_ids

    close = similar_ids(pattern or "")
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"no registered env id contains {quoted(pattern or '')}{hint}"
