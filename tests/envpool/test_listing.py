"""``expcli envs --envpool``: EnvPool's ids with the spaces expcli stores."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from expcli.cli import app


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "160")
    return CliRunner()


def test_ids_with_the_spaces_expcli_stores(envpool: Any, runner: CliRunner) -> None:
    result = runner.invoke(app, ["envs", "--envpool", "--json", "mountaincar"])
    assert result.exit_code == 0, result.output
    entries = {e["id"]: e for e in json.loads(result.stdout)}
    assert set(entries) == {"MountainCar-v0", "MountainCarContinuous-v0"}
    assert entries["MountainCar-v0"]["gym_equivalent"] is True
    assert entries["MountainCarContinuous-v0"]["gym_equivalent"] is False
    assert entries["MountainCar-v0"]["action_space"] == "Discrete(3)"
    assert entries["MountainCar-v0"]["max_episode_steps"] == 200
    result = runner.invoke(app, ["envs", "--envpool", "pong"])
    assert result.exit_code == 0, result.output
    [row] = [line for line in result.stdout.splitlines() if line.startswith("Pong-v5 ")]
    assert "Box(0, 255, (1, 84, 84), uint8)" in row and "Discrete(6)" in row  # one frame
    assert row.split()[-2:] == ["4", "ok"]  # stands for a stack of 4
    assert "1 EnvPool envs; 0 the env gym.make builds" in result.stderr


def test_no_spaces_lists_families_and_no_match_says_so(envpool: Any, runner: CliRunner) -> None:
    result = runner.invoke(app, ["envs", "--envpool", "--no-spaces", "breakout"])
    assert result.exit_code == 0
    assert "Breakout-v5" in result.stdout and "envpool.atari" in result.stdout
    result = runner.invoke(app, ["envs", "--envpool", "zzzqqq"])
    assert result.exit_code == 0 and result.stdout == ""
    assert "EnvPool has no id containing 'zzzqqq'" in result.stderr
