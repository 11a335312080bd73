"""Typer's coercion of command-line values, without pydantic for the plain ones.

Typer (0.22 on) coerces every parameter through a pydantic ``TypeAdapter``: importing
pydantic and building one command's adapters took about 0.2 s here, a sixth of a
100-step collect. A command line gives strings, and for the plain types (``str``,
``bool``, ``int`` and ``float`` within their bounds, ``Path``, enum choices, a
``parser``'s values, lists of these) the value Typer makes of a well-formed string is
known without pydantic, so it is made here, with Typer's own path and choice checks. Any
other value (a number out of bounds or not written plainly, a word that is no choice,
...) goes to Typer's adapter, built then, so the result and the error message are
Typer's; so do the types not named here. ``tests/cli/test_quick_values.py`` compares both
ways for every parameter of every command.
"""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

from typer import _click

try:  # Typer before 0.22 has no pydantic, and nothing to quicken
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_choice, coerce_cli_path, routes_to_path
    from typer.core import _TyperParameter

    _TYPER_ADAPTS = True
except ImportError:  # pragma: no cover (the installed Typer has them)
    _TYPER_ADAPTS = False

__all__ = ["quicken"]

_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")


class _Unknown:
    """What ``_plain`` answers for a value it leaves to Typer's adapter."""


_UNKNOWN = _Unknown()


def quicken(params: list[_click.Parameter]) -> list[_click.Parameter]:
    """Give each of Typer's parameters of a plain type the coercion here (in place)."""
    if not _TYPER_ADAPTS:  # pragma: no cover
        return params
    for param in params:
        if isinstance(param, _TyperParameter) and param._runtime_param is None:
            descriptor = param.type_descriptor
            if _plain_type(descriptor.annotation, descriptor.parameter_info):
                param._runtime_param = _QuickParam(descriptor.parameter_info, descriptor.annotation)
    return params


def _plain_type(annotation: Any, info: Any) -> bool:
    """Whether ``_plain`` knows values of ``annotation`` (a list's items included)."""
    if getattr(info, "click_type", None) is not None:
        return False
    if get_origin(annotation) is list:
        [annotation] = get_args(annotation)
    if info.parser is not None or annotation is bool:
        return True
    if annotation in (str, int, float):
        return not info.clamp
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return True
    return get_origin(annotation) is None and routes_to_path(annotation, info)


if _TYPER_ADAPTS:

    class _QuickParam(RuntimeParam):
        """Coerces plain values itself and hands the rest to Typer's own coercion."""

        def _coerce_value(self, value: Any, param: Any, ctx: _click.Context) -> Any:
            made = _plain(self.annotation, self.parameter_info, value, param, ctx)
            if made is _UNKNOWN:
                typer_own = build_runtime_param(param.type_descriptor)
                return typer_own._coerce_value(value, param=param, ctx=ctx)
            return made


def _plain(annotation: Any, info: Any, value: Any, param: Any, ctx: _click.Context) -> Any:
    """The value Typer would make of ``value``, or ``_UNKNOWN`` to let Typer make it."""
    if get_origin(annotation) is list:
        if not isinstance(value, list | tuple):
            return _UNKNOWN
        [item_type] = get_args(annotation)
        items = [_plain(item_type, info, item, param, ctx) for item in value]
        return _UNKNOWN if any(item is _UNKNOWN for item in items) else items
    if info.parser is not None:
        try:
            return info.parser(value)
        except (ValueError, AssertionError):  # what pydantic reports: Typer's message
            return _UNKNOWN
    if annotation is str or annotation is bool:
        return value if type(value) is annotation else _UNKNOWN
    if annotation is int or annotation is float:
        number = _number(annotation, value)
        if number is None:
            return _UNKNOWN
        low, high = info.min, info.max
        if (low is not None and number < low) or (high is not None and number > high):
            return _UNKNOWN  # Typer's message names the bound
        return number
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        try:
            return coerce_cli_choice(
                value, choices=list(annotation), case_sensitive=info.case_sensitive, ctx=ctx
            )
        except ValueError:
            return _UNKNOWN
    path_type = info.path_type
    if path_type is None and isinstance(annotation, type) and issubclass(annotation, Path):
        path_type = annotation  # as Typer's path adapter takes it
    if not (isinstance(value, Path) or (type(value) is str and value and "\0" not in value)):
        return _UNKNOWN
    if isinstance(path_type, type) and issubclass(path_type, Path):
        value = path_type(value)  # what pydantic makes of a path's string
    return coerce_cli_path(value, info, path_type=path_type, param=param, ctx=ctx)


def _number(kind: type, value: Any) -> int | float | None:
    """``value`` as an ``int`` or ``float`` when it is one, or a string written plainly."""
    plain = type(value) is kind or (kind is float and type(value) is int)
    if not plain and type(value) is str:
        plain = bool((_INT if kind is int else _FLOAT).fullmatch(value))
    if not plain:
        return None
    return int(value) if kind is int else float(value)
