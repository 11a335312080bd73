"""``expcli inspect``: a thin layer over ``summary.summarize`` (``report.write_report``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from expcli.cli._console import dataset_bytes, err_console, file_progress, out_console, phases_on
from expcli.cli._errors import reports_errors
from expcli.cli._read_options import (
    ColumnsOption,
    DoneMeansOption,
    NumEnvs,
    warn_unrecorded_envs,
)
from expcli.errors import printable

if TYPE_CHECKING:
    from expcli.formats.column_roles import ColumnRoles
    from expcli.summary import Summary

PROGRESS_MIN_BYTES = 64 * 1024 * 1024


_File = Annotated[
    Path | None,
    typer.Argument(
        help="Dataset ({sources}); default: the newest dataset under runs/.",
        show_default=False,
        metavar="FILE",
    ),
]
_Json = Annotated[
    bool, typer.Option("--json", help="Print one JSON object to stdout, nothing else.")
]
_Episodes = Annotated[bool, typer.Option("--episodes/--no-episodes", help="Episode statistics.")]
_PerEnv = Annotated[
    bool, typer.Option("--per-env", help="Add one row of episode statistics per env column.")
]
_Head = Annotated[
    int,
    typer.Option("--head", min=0, help="Print the first N valid transitions, oldest first."),
]
_Check = Annotated[
    bool,
    typer.Option(
        "--check",
        help="Run the structural checks, repeated episodes among them; exit 1 when any fails.",
    ),
]
_Against = Annotated[
    list[Path] | None,
    typer.Option(
        "--against",
        help="Another dataset (a validation or test split): report the episodes FILE "
        "shares with it, bit for bit. Repeatable; implies --check.",
        show_default=False,
        metavar="OTHER",
    ),
]
_Html = Annotated[
    Path | None,
    typer.Option(
        "--html",
        help="Also write an HTML report: charts and an episode player, in one file that "
        "needs no network (replaced if it exists). Needs the report extra.",
        show_default=False,
        metavar="REPORT.html",
    ),
]
_Plot = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        help="Also write a one-page figure of returns and lengths: .png, .svg or .pdf by "
        "the suffix (replaced if it exists). Needs the report extra.",
        show_default=False,
        metavar="FILE",
    ),
]


@reports_errors
def inspect_cmd(
    file: _File = None,
    as_json: _Json = False,
    episodes: _Episodes = True,
    per_env: _PerEnv = False,
    head: _Head = 0,
    check: _Check = False,
    against: _Against = None,
    html: _Html = None,
    plot: _Plot = None,
    num_envs: NumEnvs = None,
    columns: ColumnsOption = None,
    done_means: DoneMeansOption = None,
) -> None:
    """Summarize a dataset: tensor statistics, episodes, and (--check) structural checks."""
    from expcli.formats.column_roles import column_roles
    from expcli.summary import summarize

    out = out_console()
    if file is None:
        file = _newest(as_json)
    for read in (file, *(against or ())):
        warn_unrecorded_envs(read, num_envs)
    check = check or bool(against)
    what = "checking" if check else "reading"
    mapping = column_roles(columns, done_means)
    if html is not None or plot is not None:
        read = (num_envs, mapping)
        summary = _report(file, html, plot, episodes, head, check, against or [], read)
    else:
        with file_progress(file, what, min_bytes=PROGRESS_MIN_BYTES) as bar:
            summary = summarize(
                file,
                episodes=episodes,
                head=head,
                check=check,
                against=against or (),
                num_envs=num_envs,
                progress=None if bar is None else lambda done: bar(done, what),
                columns=mapping,
            )
    if as_json:
        typer.echo(json.dumps(summary.to_json(per_env=per_env), allow_nan=False))
    else:
        from expcli.cli._inspect_render import render

        render(out, summary, per_env=per_env)
    if summary.failed:
        raise typer.Exit(1)


def _newest(as_json: bool) -> Path:
    """The newest dataset under ``runs/``, and a line saying it is the one inspected.

    The line goes to stderr under ``--json`` (stdout holds the JSON object alone).
    """
    from rich.markup import escape

    from expcli.summary import newest_dataset

    file = newest_dataset()
    shown = escape(printable(str(file)))
    if as_json:
        err_console().print(f"inspecting the newest dataset: {shown}", highlight=False)
    else:
        out_console().print(f"newest dataset under runs/: {shown}", highlight=False, soft_wrap=True)
    return file


def _report(
    file: Path,
    html: Path | None,
    plot: Path | None,
    episodes: bool,
    head: int,
    check: bool,
    against: list[Path],
    read: tuple[int | None, ColumnRoles | None],
) -> Summary:
    """``write_report`` with a progress bar (reading, then the page), then where it wrote.

    ``read``: how the files are read: ``num_envs`` and the column mapping.
    """
    from rich.markup import escape

    from expcli.errors import ConfigError
    from expcli.report import write_report

    if not episodes:
        raise ConfigError("--html and --plot show episodes: leave out --no-episodes")
    total = 2.0 if html is not None else 1.0
    with file_progress(file, "reading", min_bytes=PROGRESS_MIN_BYTES, total=total) as bar:
        summary = write_report(
            file,
            html=html,
            plot=plot,
            num_envs=read[0],
            columns=read[1],
            check=check,
            against=against,
            head=head,
            progress=None if bar is None else phases_on(bar),
        )
    for written in (html, plot):
        if written is not None:
            size = dataset_bytes(written)
            shown = escape(printable(str(written)))
            err_console().print(
                f"wrote {shown} ({size / 1e6:.1f} MB)", highlight=False, soft_wrap=True
            )
    return summary
