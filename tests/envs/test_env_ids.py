"""An unknown env id is answered with what would make it known (run in a fresh process,
since the answer may import the package that registers the id)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_CHECK = """
import sys
from expcli.envs import env_ids
from expcli.errors import ConfigError

env_ids._PACKAGES["ExpcliNowhere-"] = ("expcli_no_such_module", "expcli-no-such-package")
for env_id in sys.argv[1:]:
    try:
        print(env_ids.check_env_id(env_id))
    except ConfigError as e:
        print(e)
"""


def _answers(*env_ids: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _CHECK, *env_ids],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_an_env_of_a_package_not_imported_names_the_id_to_use() -> None:
    pytest.importorskip("ale_py")
    pytest.importorskip("minigrid")
    assert _answers("ALE/Pong-v5", "ale_py:ALE/Pong-v5") == [
        "unknown env id 'ALE/Pong-v5'; ale_py registers it when imported: use ale_py:ALE/Pong-v5",
        "ALE/Pong-v5",
    ]
    assert _answers("ALE/Pongg-v5") == [
        "unknown env id 'ALE/Pongg-v5'; did you mean ale_py:ALE/Pong-v5?"
    ]
    assert _answers("MiniGrid-Empty-5x5-v0") == [
        "unknown env id 'MiniGrid-Empty-5x5-v0'; minigrid registers it when imported: use "
        "minigrid:MiniGrid-Empty-5x5-v0"
    ]


def test_an_env_of_a_package_not_installed_says_what_to_install() -> None:
    assert _answers("ExpcliNowhere-v0", "CartPol-v1") == [
        "unknown env id 'ExpcliNowhere-v0'; ExpcliNowhere-v0 is an env of "
        "expcli_no_such_module, which is not installed: pip install expcli-no-such-package, "
        "then use expcli_no_such_module:ExpcliNowhere-v0",
        "unknown env id 'CartPol-v1'; did you mean 'CartPole-v1'?",
    ]


def test_collect_says_it_in_one_line() -> None:
    pytest.importorskip("ale_py")
    done = subprocess.run(
        [sys.executable, "-m", "expcli", "collect", "ALE/Pong-v5", "--steps", "10"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: unknown env id 'ALE/Pong-v5'; ale_py registers it when imported: use "
        "ale_py:ALE/Pong-v5"
    )


_ONE_ANSWER = """
from expcli.collect.job import CollectJob
from expcli.collect.settings import CollectSettings
from expcli.envs import ParallelEnv
from expcli.envs.catalog import list_envs
from expcli.errors import ConfigError

env_id = "expcli_no_such_module:Nowhere-v0"
for attempt in (
    lambda: ParallelEnv.from_id(env_id),
    lambda: CollectJob(CollectSettings(env_id=env_id, steps=1)),
    lambda: list_envs(modules=["expcli_no_such_module"]),
):
    try:
        attempt()
    except ConfigError as e:
        print(e)
"""


def test_a_module_that_cannot_be_imported_gets_one_answer_everywhere() -> None:
    """ParallelEnv, the collect job and ``expcli envs --module`` import through one function."""
    done = subprocess.run(
        [sys.executable, "-c", _ONE_ANSWER], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = done.stdout.splitlines()
    assert len(answers) == 3
    for answer in answers:
        assert "cannot import module 'expcli_no_such_module' to register its envs: " in answer


_WITHOUT_ALE = """
import importlib.util, sys
find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name == "ale_py" else find_spec(name, *a)
from expcli.envs import env_ids
from expcli.errors import ConfigError

for env_id in sys.argv[1:]:
    try:
        print(env_ids.check_env_id(env_id))
    except ConfigError as e:
        print(e)
"""


def test_an_atari_game_without_its_namespace_is_answered_with_the_ale_id() -> None:
    pytest.importorskip("ale_py")
    assert _answers("Pong-v5", "ale_py:ALE/Pong-v5") == [
        "unknown env id 'Pong-v5'; Gymnasium calls Atari's Pong ALE/Pong-v5, registered when "
        "ale_py is imported: use ale_py:ALE/Pong-v5 (Pong-v5 is EnvPool's id: --mode envpool)",
        "ALE/Pong-v5",
    ]
    assert _answers("PongNoFrameskip-v4") == [  # a fresh process: ale_py not imported yet
        "unknown env id 'PongNoFrameskip-v4'; PongNoFrameskip-v4 is an Atari env, registered "
        "when ale_py is imported: use ale_py:PongNoFrameskip-v4",
    ]


def test_an_atari_game_without_ale_py_installed_says_what_to_install() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_ALE, "Breakout-v5", "Pongg-v5"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    breakout, typo = done.stdout.splitlines()
    assert breakout == (
        "unknown env id 'Breakout-v5'; Gymnasium calls Atari's Breakout ALE/Breakout-v5, an env "
        "of ale_py, which is not installed: pip install ale-py, then use ale_py:ALE/Breakout-v5 "
        "(Breakout-v5 is EnvPool's id: --mode envpool)"
    )
    assert typo.startswith("unknown env id 'Pongg-v5'") and "ale-py" not in typo
