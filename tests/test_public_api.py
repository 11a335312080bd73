"""``expcli.__all__`` lists exactly what the package offers, and every name resolves."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import expcli


def test_all_is_sorted_and_resolves() -> None:
    assert expcli.__all__ == sorted(expcli.__all__, key=lambda n: n.strip("_").casefold())
    assert set(expcli.__all__) == {*expcli._EXPORTS, "__version__"}
    for name in expcli.__all__:
        assert getattr(expcli, name) is not None


def test_unknown_attribute_raises() -> None:
    try:
        expcli.does_not_exist  # noqa: B018
    except AttributeError as e:
        assert "does_not_exist" in str(e)
    else:
        raise AssertionError("expected AttributeError")


def test_public_names_come_from_their_modules() -> None:
    memory = importlib.import_module("expcli.memory")
    assert expcli.Memory is memory.Memory and expcli.RandomMemory is memory.RandomMemory


def test_importing_the_conversion_module_does_not_hide_convert() -> None:
    import expcli.conversion  # noqa: F401
    from expcli import convert

    assert callable(convert) and convert.__name__ == "convert"


def test_the_typing_imports_name_exactly_the_exports() -> None:
    """The ``TYPE_CHECKING`` block, read by type checkers only, is held to ``_EXPORTS``."""
    tree = ast.parse(Path(expcli.__file__).read_text(encoding="utf-8"))
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n)
    )
    typed = {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.asname == alias.name  # an explicit re-export
    }
    assert len(typed) == sum(len(n.names) for n in block.body if isinstance(n, ast.ImportFrom))
    assert typed == expcli._EXPORTS


@pytest.mark.parametrize(("old", "new"), [("read_dataset", "load"), ("write_dataset", "save")])
def test_the_old_read_and_write_names_warn_and_still_work(old: str, new: str) -> None:
    """``expcli.read_dataset``/``write_dataset`` stay for one release, with a warning."""
    from expcli import formats

    with pytest.warns(DeprecationWarning, match=f"expcli.{old} is deprecated.*use expcli.{new}"):
        function = getattr(expcli, old)
    assert function is getattr(formats, old)
    assert old not in expcli.__all__


def test_every_error_class_is_importable_from_expcli() -> None:
    """The classes users are told to catch (``expcli.errors.__all__``) come from the top."""
    from expcli import errors

    for name in errors.__all__:
        assert name in expcli.__all__, name
        assert getattr(expcli, name) is getattr(errors, name)
    from expcli import InvalidValueError, OrderError, SourceNotFoundError

    assert issubclass(InvalidValueError, ValueError) and issubclass(OrderError, RuntimeError)
    assert issubclass(SourceNotFoundError, FileNotFoundError)
