"""``expcli envs``: table and JSON on stdout, notes on stderr, errors as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from expcli.cli import app


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "160")
    return CliRunner()


def test_table_lists_matching_envs_with_spaces(runner: CliRunner) -> None:
    result = runner.invoke(app, ["envs", "cartpole"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "observation space" in lines[0] and "action space" in lines[0]
    row = next(line for line in lines if line.startswith("CartPole-v1 "))
    assert "Box((4,), float32)" in row and "Discrete(2)" in row and "500" in row
    assert "Acrobot" not in result.stdout
    assert "ready to collect" in result.stderr and "ready to collect" not in result.stdout


def test_missing_extras_show_what_to_install() -> None:
    # Box2D is hidden from a child interpreter (None in sys.modules makes its import fail),
    # so the test runs whether or not the box2d extra is installed here.
    code = (
        "import sys; sys.modules['Box2D'] = None; sys.argv = ['expcli', 'envs', 'LunarLander-v3']; "
        "from expcli.cli import app; app()"
    )
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert 'needs box2d (pip install swig && pip install "gymnasium[box2d]")' in done.stdout


def test_json_is_parseable_and_alone_on_stdout(runner: CliRunner) -> None:
    result = runner.invoke(app, ["envs", "pendulum-v1", "--json"])
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.stdout)
    assert entry["id"] == "Pendulum-v1"
    assert entry["action_space"] == "Box(-2.0, 2.0, (1,), float32)"
    assert entry["max_episode_steps"] == 200 and entry["status"] == "ok"


def test_no_spaces_lists_ids_and_entry_points(runner: CliRunner) -> None:
    result = runner.invoke(app, ["envs", "--no-spaces", "Acrobot"])
    assert result.exit_code == 0
    assert "entry point" in result.stdout and "observation space" not in result.stdout
    assert "gymnasium.envs.classic_control.acrobot:AcrobotEnv" in result.stdout
    listed = json.loads(runner.invoke(app, ["envs", "--no-spaces", "--json"]).stdout)
    assert all(e["observation_space"] is None and e["status"] == "" for e in listed)
    assert len(listed) > 20


def test_no_match_says_so_with_suggestions(runner: CliRunner) -> None:
    result = runner.invoke(app, ["envs", "cartpoel"])
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "no registered env id contains 'cartpoel'; did you mean CartPole" in result.stderr
    assert json.loads(runner.invoke(app, ["envs", "zzzqqq", "--json"]).stdout) == []


def test_a_module_that_cannot_be_imported_is_one_error_line(runner: CliRunner) -> None:
    result = runner.invoke(app, ["envs", "--module", "no_such_plugin_module"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: cannot import module 'no_such_plugin_module' to register its envs: "
        "No module named 'no_such_plugin_module'"
    ]


def test_real_subprocess_with_warnings_as_errors() -> None:
    """Gymnasium's warnings cannot break the listing, even with -W error."""
    out = subprocess.run(
        [sys.executable, "-W", "error", "-m", "expcli", "envs", "--json", "v1"],
        capture_output=True,
        text=True,
        check=True,
    )
    ids = {e["id"] for e in json.loads(out.stdout)}
    assert {"CartPole-v1", "Acrobot-v1", "Pendulum-v1"} <= ids
