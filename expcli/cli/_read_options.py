"""Options of the commands that read or write datasets: ``--num-envs``, ``--columns`` ...

``--columns`` and ``--done-means`` say how a table is read (``formats.column_roles``).

A CSV file without its sidecar (skrl's export, or ``convert --layout skrl`` to ``.csv``) holds
one row per transition in ``(t, env)`` order and nothing says how many envs there were: it
is read as one env column unless ``--num-envs`` says otherwise, and then its episodes are
wrong. The commands that read such a file say so, in one line on stderr.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from expcli.cli._console import err_console
from expcli.cli._errors import reports_errors
from expcli.cli._help import choices_shown
from expcli.errors import ConfigError, ExpcliError, printable, quoted
from expcli.formats.column_roles import ColumnRoles, DoneMeans, column_roles
from expcli.spec import Compression, FramesForm, ImagesForm

__all__ = [
    "ColumnsOption",
    "DoneMeansOption",
    "FramesOption",
    "ImagesOption",
    "NumEnvs",
    "completing",
    "parse_compression",
    "parse_frames",
    "typed_choice",
    "warn_unrecorded_envs",
]

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


def parse_columns(value: str) -> ColumnRoles:
    """``--columns ROLE=COLUMN,...`` as a ``ColumnRoles``.

    Raises:
        ConfigError: An item that is not ROLE=COLUMN, an unknown role, a role or a column
            twice.
    """
    return column_roles(value) or ColumnRoles()


def parse_done_means(value: str) -> DoneMeans:
    """The ``DoneMeans`` spelled ``value`` exactly.

    Raises:
        ConfigError: None is, naming those there are.
    """
    return _spelled(value, DoneMeans, "--done-means")


def completing(values: Iterable[str] | Callable[[], Iterable[str]]) -> Callable[[str], list[str]]:
    """A shell completer of an option: the choices that start with what is typed.

    ``values`` may be a function, asked when completing (formats registered by then count).
    """

    def complete(incomplete: str) -> list[str]:
        given = values() if callable(values) else values
        return [value for value in given if value.startswith(incomplete)]

    return complete


def typed_choice(
    flag: str,
    help: str,
    parse: Callable[[str], StrEnum],
    choices: Iterable[str],
    metavar: str | None = None,
) -> Any:
    """A Typer option whose value ``parse`` turns into a typed choice (a ``StrEnum``).

    The help shows the ``choices`` (``[a|b|c]``, or ``metavar`` where given) and the shell
    completes them; a value ``parse`` refuses is its ``ExpcliError`` in one red line and its
    exit code (``reports_errors``), as the command's own errors are.
    """
    values = [str(c) for c in choices]
    return typer.Option(
        flag,
        help=help,
        parser=reports_errors(parse),
        metavar=metavar or choices_shown(values),
        autocompletion=completing(values),
    )


def parse_compression(value: str) -> Compression:
    """The ``Compression`` spelled ``value`` exactly.

    Raises:
        ConfigError: No such compression, naming the ones there are.
    """
    return _spelled(value, Compression, "compression")


def parse_frames(value: str) -> FramesForm:
    """The ``FramesForm`` spelled ``value`` exactly.

    Raises:
        ConfigError: No such form, naming the ones there are.
    """
    return _spelled(value, FramesForm, "--frames")


def parse_images(value: str) -> ImagesForm:
    """The ``ImagesForm`` spelled ``value`` exactly.

    Raises:
        ConfigError: No such form, naming the ones there are.
    """
    return _spelled(value, ImagesForm, "--images")


_Choice = TypeVar("_Choice", bound=StrEnum)


def _spelled(value: str, choices: type[_Choice], what: str) -> _Choice:
    """The member of ``choices`` spelled ``value`` exactly.

    Raises:
        ConfigError: None is, naming ``what`` and the spellings there are.
    """
    for choice in choices:
        if value == choice.value:
            return choice
    names = ", ".join(c.value for c in choices)
    raise ConfigError(f"unknown {what} {quoted(value)}; expected one of {names}")


FramesOption = Annotated[
    FramesForm,
    typed_choice(
        "--frames",
        "How expcli files and folders store next observations: once (each frame of 64 bytes "
        "or more that equals the next row's observation is stored there only) or full.",
        parse_frames,
        FramesForm,
    ),
]

ImagesOption = Annotated[
    ImagesForm,
    typed_choice(
        "--images",
        "How Parquet stores uint8 frames (H, W) and (H, W, 1|3|4): png (HF Image cells, which "
        "HF datasets reads as images and arrays) or raw (their bytes: faster to write, and to "
        "sample from a file the cache holds).",
        parse_images,
        ImagesForm,
    ),
]


ColumnsOption = Annotated[
    ColumnRoles | None,
    typer.Option(
        "--columns",
        metavar="ROLE=COLUMN,...",
        parser=reports_errors(parse_columns),
        help="A table's column for each role, where its names are no library's: observations, "
        "next_observations, actions, rewards, terminated, truncated, done, episode, step, "
        "env; Dict leaves observations/NAME.",
        show_default=False,
    ),
]
DoneMeansOption = Annotated[
    DoneMeans | None,
    typed_choice(
        "--done-means",
        "What a table's done column without the terminated/truncated split stands for "
        "(terminated when not said).",
        parse_done_means,
        DoneMeans,
    ),
]


def warn_unrecorded_envs(path: Path, num_envs: int | None) -> None:
    """Warn, in one line on stderr, when a file is read without ``--num-envs`` that needs it.

    A file that does not record its env columns: a CSV without sidecar (its format row's
    ``unrecorded_envs`` says so).
    """
    if num_envs is not None or not path.is_file():
        return
    from rich.markup import escape

    from expcli.formats import detect_format
    from expcli.formats.table import format_named

    try:
        row = format_named(detect_format(path))
        what = None if row is None else row.unrecorded_envs(path)
    except (ExpcliError, OSError):
        return  # the read that follows reports it
    if what is None:
        return
    err_console().print(
        f"[yellow]warning:[/yellow] {escape(printable(str(path)))}: {what} "
        f"does not record the number of envs; reading it as 1 env column (pass "
        f"--num-envs N for N envs)",
        soft_wrap=True,
        highlight=False,
    )
