"""A suffix that names another format than ``--to`` is refused on every command that writes
(issue 42): one line, exit 2, nothing written; a name without a suffix, or ``-``, takes ``--to``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from expcli.cli import app
from expcli.formats import detect_format
from tests.replay.episode_data import make_memory

# Each command that takes --to, and its arguments writing SOURCE to OUTPUT (x.npz) as parquet.
WRITING = {
    "convert": ["convert", "SOURCE", "OUTPUT", "--to", "parquet"],
    "merge": ["merge", "SOURCE", "SOURCE", "-o", "OUTPUT", "--to", "parquet"],
    "split": ["split", "SOURCE", "-o", "OUTPUT", "-o", "OTHER", "--to", "parquet"],
    "filter": ["filter", "SOURCE", "-o", "OUTPUT", "--top", "3", "--to", "parquet"],
    "collect": ["collect", "CartPole-v1", "-o", "OUTPUT", "--layout", "skrl", "--to", "pt"],
}


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("suffix")
    return Path(make_memory(20, 2, [4] * 10, seed=0, p_done=0.2).save(folder / "src.h5"))


def run(args: list[str], source: Path, output: Path, other: Path) -> Any:
    named = {"SOURCE": str(source), "OUTPUT": str(output), "OTHER": str(other)}
    argv = [named.get(a, a) for a in args]
    return CliRunner().invoke(app, argv, env={"NO_COLOR": "1", "COLUMNS": "200"})


def test_every_command_that_takes_to_is_tested() -> None:
    commands = getattr(get_command(app), "commands")  # noqa: B009 (a group: typer's click)
    taking = {
        name
        for name, command in commands.items()
        if any("--to" in getattr(p, "opts", ()) for p in command.params)
    }
    assert taking == set(WRITING)


@pytest.mark.parametrize("command", sorted(WRITING))
def test_a_suffix_naming_another_format_is_one_line_and_exit_2(
    command: str, source: Path, tmp_path: Path
) -> None:
    result = run(WRITING[command], source, tmp_path / "x.npz", tmp_path / "y.npz")
    assert result.exit_code == 2, result.output
    told = "parquet" if command != "collect" else "pt"
    fixed = "x.parquet" if command != "collect" else "x.pt"
    assert result.output.strip() == (
        f"error: x.npz names npz but --to says {told}; drop --to or name the file {fixed}"
    )
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a temporary


@pytest.mark.parametrize("command", ["convert", "merge", "split", "filter"])
def test_a_name_without_a_suffix_or_an_agreeing_one_takes_to(
    command: str, source: Path, tmp_path: Path
) -> None:
    for name in ("plain", "agrees.parquet"):
        output = tmp_path / name
        result = run(WRITING[command], source, output, tmp_path / f"other-{name}")
        assert result.exit_code == 0, result.output
        assert detect_format(output) == "parquet"


def test_stdout_takes_to(source: Path) -> None:
    result = CliRunner().invoke(app, ["convert", str(source), "-", "--to", "npz"])
    assert result.exit_code == 0 and result.stdout_bytes.startswith(b"PK")


def test_the_library_refuses_too(source: Path, tmp_path: Path) -> None:
    from expcli import convert, load, save
    from expcli.errors import ConfigError

    with pytest.raises(ConfigError, match="x.npz names npz but --to says parquet"):
        convert(source, tmp_path / "x.npz", to="parquet")
    with pytest.raises(ConfigError, match="x.h5 names hdf5 but --to says csv"):
        save(load(source), tmp_path / "x.h5", format="csv")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["convert", "merge", "split", "filter"])
def test_help_says_so(command: str) -> None:
    text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
    assert "another format is refused" in " ".join(text.replace("│", " ").split())
