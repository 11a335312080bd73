"""Help pages as Typer's and Rich's own CLIs print them: flags without metavars.

Typer prints a type beside every parameter (``--json <bool>``, ``--head <int range>
[x>=0]``, ``--module <list[str]>``), names arguments in lower case and braces a required
one in the usage line (``{src} {dst}``). The command and group classes here print a flag
alone, a value option with one upper-case word (``--envs INTEGER``, ``--step-timeout
SECONDS``) or its choices, and arguments by upper-case name: ``SRC DST`` when required,
``[FILE]`` when not. A default that is not the parameter's value is given as a string
(``show_default="10000"``) and printed as ``[default: 10000]``.
"""

from __future__ import annotations

from typing import Any

from typer import _click
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

__all__ = ["PlainHelpCommand", "PlainHelpGroup"]

_VALUE_WORDS = {"int": "INTEGER", "float": "FLOAT", "str": "TEXT", "path": "PATH"}


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
            return label
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
    """A Typer command whose help shows no type metavars (see the module)."""

    def get_params(self, ctx: _click.Context) -> list[_click.Parameter]:
        return _plain(super().get_params(ctx))


class PlainHelpGroup(TyperGroup):
    """A Typer group whose help shows no type metavars (see the module)."""

    def get_params(self, ctx: _click.Context) -> list[_click.Parameter]:
        return _plain(super().get_params(ctx))
