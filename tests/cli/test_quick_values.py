"""Plain values coerced without pydantic (``cli._quick_values``) are what Typer makes of them.

Every parameter of every command, given strings of every shape (numbers plain, signed,
out of bounds or not numbers, choices in any case, paths that exist or not, empty, ...),
through the quick coercion and through Typer's own: the same value of the same type, or
the same error, word for word.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer import _click
from typer._coercion import build_runtime_param

from expcli.cli.app import app

GROUP = typer.main.get_command(app)
PARAMS = [
    (name, param)
    for name, command in GROUP.commands.items()  # type: ignore[attr-defined]
    for param in command.get_params(_click.Context(command))
]
IDS = [f"{name}-{param.name}" for name, param in PARAMS]

WORDS = ["0", "1", "-3", "+4", "007", "1.5", "-0.25", "1e3", "2E-2", ".5", "1.", "inf", "nan",
         "1_000", " 7", "abc", "", "random", "RANDOM", "gzip", "Restart", "none", "dummy",
         "x.npz", "runs/a.h5", "-", "README.md", "expcli", "2**40", "9" * 20]  # fmt: skip


def outcome(runtime: Any, value: Any, param: Any, ctx: _click.Context) -> tuple[str, Any]:
    try:
        made = runtime.coerce(value, param=param, ctx=ctx)
    except Exception as e:  # BadParameter, or a parser's typer.Exit after its red line
        return "error", (type(e).__name__, str(e), getattr(e, "exit_code", None))
    return "value", (type(made), made)


def assert_same(name: str, param: Any, value: Any) -> None:
    ctx = _click.Context(GROUP.commands[name])  # type: ignore[attr-defined]
    quick = param.get_runtime_param()
    typer_own = build_runtime_param(param.type_descriptor)
    assert outcome(quick, value, param, ctx) == outcome(typer_own, value, param, ctx), value


def test_every_parameter_of_every_command_is_coerced_without_pydantic() -> None:
    quick = {type(param.get_runtime_param()).__name__ for _, param in PARAMS}
    assert quick == {"_QuickParam"}, quick


@pytest.mark.parametrize(("name", "param"), PARAMS, ids=IDS)
def test_each_word_gives_what_typer_gives(
    name: str, param: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(Path(__file__).parents[2])  # README.md and expcli/ exist here
    for value in [*WORDS, None, param.default, [*WORDS[:3]], (), ("1", "x")]:
        assert_same(name, param, value)


@settings(max_examples=150, deadline=None)
@given(index=st.integers(0, len(PARAMS) - 1), text=st.text(max_size=6))
def test_any_string_gives_what_typer_gives(index: int, text: str) -> None:
    name, param = PARAMS[index]
    assert_same(name, param, text)


def test_a_collect_run_never_imports_pydantic(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from expcli.cli.app import app\n"
        "try:\n"
        f"    app(['collect', 'CartPole-v1', '--steps', '20', '--mode', 'dummy', '-q', '-o',"
        f" {str(tmp_path / 'run.npz')!r}, '--compression', 'none', '--async', 'IDLE'])\n"
        "except SystemExit as end:\n"
        "    assert not end.code, end.code\n"
        "print('pydantic' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "False"
