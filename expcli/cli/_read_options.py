"""What reading a file may need to be told: ``--num-envs`` for files that do not record it.

A CSV file without its sidecar (skrl's export, or ``convert --layout skrl`` to ``.csv``) holds
one row per transition in ``(t, env)`` order and nothing says how many envs there were: it
is read as one env column unless ``--num-envs`` says otherwise, and then its episodes are
wrong. The commands that read such a file say so, in one line on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from expcli.cli._console import err_console

__all__ = ["NumEnvs", "warn_unrecorded_envs"]

NumEnvs = Annotated[
    int | None,
    typer.Option(
        "--num-envs",
        min=1,
        help="Env columns of a file that does not record them (a CSV without sidecar, such "
        "as skrl's export; a D4RL file): its rows are t * N + env. Ignored by files that "
        "record them.",
        show_default=False,
    ),
]


def warn_unrecorded_envs(path: Path, num_envs: int | None) -> None:
    """Warn, in one line on stderr, when a CSV without sidecar is read without ``--num-envs``."""
    if num_envs is not None or not path.is_file():
        return
    from rich.markup import escape

    from expcli.errors import ExpcliError, printable
    from expcli.formats import detect_format
    from expcli.formats.csv_format import sidecar_path

    try:
        if detect_format(path) != "csv" or sidecar_path(path).exists():
            return
    except (ExpcliError, OSError):
        return  # the read that follows reports it
    err_console().print(
        f"[yellow]warning:[/yellow] {escape(printable(str(path)))}: a CSV file without its "
        f"sidecar does not record the number of envs; reading it as 1 env column (pass "
        f"--num-envs N for N envs)",
        soft_wrap=True,
        highlight=False,
    )
