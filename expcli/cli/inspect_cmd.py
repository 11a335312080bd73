"""``expcli inspect``: a thin layer over ``expcli.summary.summarize``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from expcli.cli._console import err_console, file_progress, out_console
from expcli.cli._errors import reports_errors
from expcli.cli._read_options import NumEnvs, warn_unrecorded_envs
from expcli.errors import printable

PROGRESS_MIN_BYTES = 64 * 1024 * 1024


@reports_errors
def inspect_cmd(
    file: Annotated[
        Path | None,
        typer.Argument(
            help="Dataset ({sources}); default: the newest dataset under runs/.",
            show_default=False,
            metavar="FILE",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object to stdout, nothing else.")
    ] = False,
    episodes: Annotated[
        bool, typer.Option("--episodes/--no-episodes", help="Episode statistics.")
    ] = True,
    per_env: Annotated[
        bool, typer.Option("--per-env", help="Add one row of episode statistics per env column.")
    ] = False,
    head: Annotated[
        int,
        typer.Option("--head", min=0, help="Print the first N valid transitions, oldest first."),
    ] = 0,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Run the structural checks, repeated episodes among them; exit 1 when any fails.",
        ),
    ] = False,
    against: Annotated[
        list[Path] | None,
        typer.Option(
            "--against",
            help="Another dataset (a validation or test split): report the episodes FILE "
            "shares with it, bit for bit. Repeatable; implies --check.",
            show_default=False,
            metavar="OTHER",
        ),
    ] = None,
    num_envs: NumEnvs = None,
) -> None:
    """Summarize a dataset: tensor statistics, episodes, and (--check) structural checks."""
    from rich.markup import escape

    from expcli.summary import newest_dataset, summarize

    out = out_console()
    if file is None:
        file = newest_dataset()
        shown = escape(printable(str(file)))
        if as_json:
            err_console().print(f"inspecting the newest dataset: {shown}", highlight=False)
        else:
            out.print(f"newest dataset under runs/: {shown}", highlight=False, soft_wrap=True)
    for read in (file, *(against or ())):
        warn_unrecorded_envs(read, num_envs)
    check = check or bool(against)
    what = "checking" if check else "reading"
    with file_progress(file, what, min_bytes=PROGRESS_MIN_BYTES) as bar:
        summary = summarize(
            file,
            episodes=episodes,
            head=head,
            check=check,
            against=against or (),
            num_envs=num_envs,
            progress=None if bar is None else lambda done: bar(done, what),
        )
    if as_json:
        typer.echo(json.dumps(summary.to_json(per_env=per_env), allow_nan=False))
    else:
        from expcli.cli._inspect_render import render

        render(out, summary, per_env=per_env)
    if summary.failed:
        raise typer.Exit(1)
