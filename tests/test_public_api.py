"""``expcli.__all__`` lists exactly what the package offers, and every name resolves."""

from __future__ import annotations

import importlib

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
