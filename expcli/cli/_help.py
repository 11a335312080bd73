"""Help pages as Typer's and Rich's own CLIs print them: flags without metavars.

Typer prints a type beside every parameter (``--json <bool>``, ``--head <int range>
[x>=0]``, ``--module <list[str]>``), names arguments in lower case and braces a required
one in the usage line (``{src} {dst}``). The command and group classes here print a flag
alone, a value option with one upper-case word (``--envs INTEGER``, ``--step-timeout
SECONDS``) or its choices, and arguments by upper-case name: ``SRC DST`` when required,
``[FILE]`` when not. A default that is not the parameter's value is given as a string
(``show_default="10000"``) and printed as ``[default: 10000]``.

Help texts name formats, suffixes and layouts by placeholders (``{formats}``,
``{sources}``, ...: ``table_words``), filled from the format table when the help is printed,
so a registered format shows up and ``expcli`` loads the table only to print help.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from typer import _click
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from expcli.cli._quick_values import quicken

__all__ = [
    "PlainHelpCommand",
    "PlainHelpGroup",
    "choices_shown",
    "convert_targets",
    "file_and_folder_formats",
    "layout_file_formats",
    "shard_choices",
    "storage_choices",
    "table_words",
    "to_choices",
]

_VALUE_WORDS = {"int": "INTEGER", "float": "FLOAT", "str": "TEXT", "path": "PATH"}
_PLACEHOLDERS = (
    "formats",
    "titles",
    "sources",
    "suffixes",
    "streams",
    "stream_names",
    "compressing",
    "compressions",
    "layouts",
    "shard_formats",
    "by_format",
    "format_choices",
    "to_choices",
    "storage_choices",
    "layout_file_choices",
    "shard_choices",
)


def table_words() -> dict[str, str]:
    """What each placeholder of a help text stands for, read from the format table.

    ``formats``: the file formats (``pt, npz, csv or hdf5``); ``titles``: the same as prose
    names them (``pt, npz, csv and HDF5``); ``sources``: what a command reads (``.pt, .npz,
    .csv, .h5, or a Minari or LeRobot folder``); ``suffixes``: the file formats' usual suffixes
    (``.pt, .npz, .csv, .h5``); ``streams``: what ``-`` writes, with what a stream
    leaves out (``npz, pt or csv (rows only)``); ``stream_names``: the same, names only;
    ``compressing``: the formats that compress (``HDF5``); ``compressions`` and
    ``layouts``: the choices of ``--compression`` and ``--layout``; ``shard_formats``:
    those of ``--shard-format``; ``by_format``: the compressions of each format that
    compresses (``HDF5: none, gzip or lzf; Parquet: ...``). The metavars of the options whose
    choices the table holds: ``format_choices`` (``[pt|npz|...]``), ``to_choices`` (those and
    the layouts' storages), ``storage_choices`` (the layouts' storages: ``--storage``),
    ``layout_file_choices`` (the formats of the layouts that write a file: collect's
    ``--to``) and ``shard_choices``.
    """
    from expcli.formats.layouts import LAYOUTS
    from expcli.formats.table import (
        format_named,
        formats_in_order,
        listed,
        shard_formats,
        source_help,
        stream_formats,
        suffix_help,
    )
    from expcli.spec import COMPRESSIONS

    files = [row for row in formats_in_order() if not row.folder]
    formats, storages = to_choices()
    streams = [row for name in stream_formats() if (row := format_named(name)) is not None]
    return {
        "formats": listed([row.name for row in files]),
        "titles": listed([row.shown for row in files if row.writes], "and"),
        "sources": source_help(),
        "suffixes": suffix_help(),
        "streams": listed(
            [f"{row.name} ({row.stream_note})" if row.stream_note else row.name for row in streams]
        ),
        "stream_names": listed([row.name for row in streams]),
        "compressing": listed([row.shown for row in files if row.compresses]),
        "compressions": listed(list(COMPRESSIONS)),
        "layouts": ", ".join(LAYOUTS),
        "shard_formats": listed(list(shard_formats())),
        "by_format": "; ".join(
            f"{row.shown}: {listed(list(row.compressions or COMPRESSIONS))}"
            for row in files
            if row.compresses
        ),
        "format_choices": choices_shown(formats),
        "to_choices": choices_shown(convert_targets()),
        "storage_choices": choices_shown(storages),
        "layout_file_choices": choices_shown(layout_file_formats()),
        "shard_choices": choices_shown(shard_formats()),
    }


def to_choices() -> tuple[list[str], list[str]]:
    """What ``--to`` may name: the formats (files, then folders), and the layouts' storages."""
    from expcli.formats.table import formats_in_order, layouts_in_order

    storages: list[str] = []
    for row in layouts_in_order():
        storages += [s for s in row.storages if s not in storages]
    return [row.name for row in formats_in_order() if row.writes], storages


def file_and_folder_formats() -> list[str]:
    """What merge, split and filter's ``--to`` may name: the formats (files, then folders)."""
    return to_choices()[0]


def storage_choices() -> list[str]:
    """What ``--storage`` may name: the storages of the layouts kept in folders."""
    return to_choices()[1]


def layout_file_formats() -> list[str]:
    """What collect's ``--to`` may name: the formats of the layouts that write a file."""
    from expcli.formats.table import layouts_in_order

    out: list[str] = []
    for row in layouts_in_order():
        out += [f for f in row.formats if f not in out]
    return out


def convert_targets() -> list[str]:
    """What convert's ``--to`` once named: the formats, then the layouts' other storages."""
    formats, storages = to_choices()
    return [*formats, *(s for s in storages if s not in formats)]


def shard_choices() -> list[str]:
    """What ``--shard-format`` may name: the formats a sharded folder's shards may be in."""
    from expcli.formats.table import shard_formats

    return list(shard_formats())


def choices_shown(values: Iterable[str]) -> str:
    """``[auto|dummy|subproc]``: an option's choices as its help's metavar shows them."""
    return "[" + "|".join(values) + "]"


def _filled(text: str | None, words: dict[str, str]) -> str | None:
    """``text`` with its placeholders replaced by ``words``."""
    if not text or "{" not in text:
        return text
    for key in _PLACEHOLDERS:
        text = text.replace("{" + key + "}", words[key])
    return text


def _has_placeholder(text: str | None) -> bool:
    return bool(text) and any("{" + key + "}" in (text or "") for key in _PLACEHOLDERS)


def _fill(commands: list[_click.Command]) -> None:
    """Fill the placeholders of these commands' help and of their parameters' (in place)."""
    helped: list[TyperOption | TyperArgument | _click.Command] = [*commands]
    params = [p for c in commands for p in c.params if isinstance(p, TyperOption | TyperArgument)]
    helped += params
    if not any(_has_placeholder(item.help) for item in helped) and not any(
        _has_placeholder(p.metavar) for p in params
    ):
        return  # the table is read only for a help text that names formats
    words = table_words()
    for item in helped:
        item.help = _filled(item.help, words)
    for param in params:
        param.metavar = _filled(param.metavar, words)


def _default_string(param: TyperArgument | TyperOption, show_default_is_str: bool) -> str | None:
    """A string ``show_default`` as written (Typer wraps it in parentheses); else ``None``."""
    return str(param.show_default) if show_default_is_str else None


class _PlainArgument(TyperArgument):
    """An argument named in upper case, with no type and no range beside it."""

    def display_type_rich(self, ctx: _click.Context) -> str | None:
        return None

    def _get_number_range_help_str(self) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name if self.nargs == 1 else name + "..."

    def _get_default_string(
        self, *, ctx: _click.Context, show_default_is_str: bool, default_value: Any
    ) -> str:
        given = _default_string(self, show_default_is_str)
        if given is not None:
            return given
        return super()._get_default_string(
            ctx=ctx, show_default_is_str=show_default_is_str, default_value=default_value
        )


class _PlainOption(TyperOption):
    """A flag alone; a value option with its metavar, one upper-case word or its choices."""

    def display_type_rich(self, ctx: _click.Context) -> str | None:
        if self.metavar is not None:
            return self.metavar
        if self.is_flag:
            return None
        label = self.display_type(ctx).strip("<>").removesuffix(" range")
        if self.type_descriptor.is_choice:
            return f"[{label}]"
        label = label.removeprefix("list[").removesuffix("]")  # repeatable: said in its help
        return _VALUE_WORDS.get(label, label.upper())

    def _get_number_range_help_str(self) -> str | None:
        return None

    def _get_default_string(
        self, *, ctx: _click.Context, show_default_is_str: bool, default_value: Any
    ) -> str:
        given = _default_string(self, show_default_is_str)
        if given is not None:
            return given
        return super()._get_default_string(
            ctx=ctx, show_default_is_str=show_default_is_str, default_value=default_value
        )


def _plain(params: list[_click.Parameter]) -> list[_click.Parameter]:
    """Give Typer's parameters the plain help display above (in place)."""
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = _PlainOption
        elif type(param) is TyperArgument:
            param.__class__ = _PlainArgument
            if param.metavar is None and param.name is not None:
                param.metavar = param.name.upper()
    return params


class PlainHelpCommand(TyperCommand):
    """A Typer command whose help shows no type metavars (see the module).

    Its parameters coerce plain values without pydantic (``_quick_values``).
    """

    def get_params(self, ctx: _click.Context) -> list[_click.Parameter]:
        return quicken(_plain(super().get_params(ctx)))

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        _fill([self])
        _pair_negations(self.params)
        super().format_help(ctx, formatter)


def _pair_negations(params: list[_click.Parameter]) -> None:
    """Show ``--spool/--no-spool`` as one long flag (in place; only help is printed after).

    Typer's help puts an option's second spelling in a column of its own, beside the short
    flags (``-o``), where ``--no-spool`` reads as another option's short form.
    """
    for param in params:
        if isinstance(param, TyperOption) and param.secondary_opts:
            param.opts = ["/".join([*param.opts, *param.secondary_opts])]
            param.secondary_opts = []


class PlainHelpGroup(TyperGroup):
    """A Typer group whose help shows no type metavars (see the module), as the command."""

    def get_params(self, ctx: _click.Context) -> list[_click.Parameter]:
        return quicken(_plain(super().get_params(ctx)))

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        _fill([self, *self.commands.values()])
        super().format_help(ctx, formatter)
