"""An output whose folders do not exist: they are made, and every writing command's help says
so (issue 42)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from expcli import load
from expcli.cli import app


def test_collect_makes_the_folders_of_its_output(tmp_path: Path) -> None:
    target = tmp_path / "nodir" / "sub" / "x.npz"
    args = ["collect", "CartPole-v1", "--steps", "10", "--mode", "dummy", "-q", "-o", str(target)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(target) and len(load(target)) == 10


@pytest.mark.parametrize("command", ["collect", "convert", "merge", "split", "filter"])
def test_help_says_that_missing_folders_are_made(command: str) -> None:
    text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
    flat = " ".join(text.replace("│", " ").split())
    assert "missing folders on its path are made" in flat.lower()
