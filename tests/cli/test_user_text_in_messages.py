"""User text in messages is printed as typed (no rich markup, no ``:emoji:`` codes), and long
input is quoted by its first 80 characters (issue 42); ranges are spelled ``start:stop``."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from expcli import load
from expcli.cli import app
from expcli.errors import QUOTE_CHARS, quoted
from expcli.shaping.selectors import old_env_ranges, parse_envs
from tests.replay.episode_data import make_memory


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("text")
    return Path(make_memory(20, 4, [4] * 10, seed=0, p_done=0.2).save(folder / "src.npz"))


def run(*args: str) -> tuple[int, list[str], str]:
    result = CliRunner().invoke(app, list(args), env={"NO_COLOR": "1", "COLUMNS": "80"})
    return result.exit_code, result.stderr.splitlines(), result.stdout


def test_an_episodes_error_shows_the_slice_as_typed(source: Path, tmp_path: Path) -> None:
    code, lines, _ = run(
        "filter", str(source), "-o", str(tmp_path / "x.npz"), "--episodes", "x:0:100:2"
    )
    assert code == 2 and len(lines) == 1, lines
    assert "'x:0:100:2'" in lines[0] and "0:100:2 or 3,7,9" in lines[0]
    assert "\N{HUNDRED POINTS SYMBOL}" not in lines[0]


def test_markup_in_user_text_is_printed_as_typed(source: Path, tmp_path: Path) -> None:
    where = "return >= [bold]x[/bold] :100:"
    code, lines, _ = run("filter", str(source), "-o", str(tmp_path / "x.npz"), "--where", where)
    assert code == 2 and lines == [
        f"error: --where: unexpected character '[' at column 11; in: {where}"
    ]
    code, lines, _ = run("collect", ":smile:[red]x", "--steps", "5")
    assert code == 2 and len(lines) == 1 and "':smile:[red]x'" in lines[0], lines


def test_a_long_where_is_quoted_by_its_first_80_characters(source: Path, tmp_path: Path) -> None:
    where = "return >= 1 and " + "x" * 126_000
    code, lines, _ = run("filter", str(source), "-o", str(tmp_path / "x.npz"), "--where", where)
    assert code == 2 and len(lines) == 1, lines
    assert len(lines[0]) < 400
    assert where[:QUOTE_CHARS] + "… (126,016 characters)" in lines[0]
    code, lines, _ = run(
        "filter", str(source), "-o", str(tmp_path / "x.npz"), "--top", "9" * 500 + "%%"
    )
    assert code == 2 and len(lines) == 1 and len(lines[0]) < 250, lines


def test_quoted_keeps_short_text_whole_and_cuts_long_text() -> None:
    assert quoted("0:100") == "'0:100'"
    assert quoted("a" * 81) == repr("a" * 80) + "… (81 characters)"


def test_envs_ranges_are_start_stop_and_the_old_spelling_is_read_with_a_note(
    source: Path, tmp_path: Path
) -> None:
    assert parse_envs("0:2,3") == (range(2), range(3, 4))
    assert parse_envs("1-2") == (range(1, 3),)
    assert parse_envs("2:")[0].start == 2 and 10**6 in parse_envs("2:")[0]
    assert old_env_ranges("1-2,3") == "1:3,3" and old_env_ranges("1:3") is None
    new, old = tmp_path / "new.npz", tmp_path / "old.npz"
    code, lines, _ = run("filter", str(source), "-o", str(new), "--envs", "1:3")
    assert code == 0 and lines == []
    code, lines, _ = run("filter", str(source), "-o", str(old), "--envs", "1-2")
    assert code == 0 and lines == [
        "note: --envs 1-2 is read as --envs 1:3 (ranges are written start:stop, as for --episodes)"
    ]
    assert load(new).tensors.keys() == load(old).tensors.keys()
    for name, array in load(new).tensors.items():
        assert (load(old).tensors[name] == array).all() or name.startswith("obs"), name
