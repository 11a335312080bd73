"""``collect --resume`` under a hostile or careless hand: a folder never runs code on its own
word, options given with ``--resume`` are merged or refused (never ignored), and every
refused resume leaves the folder byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import expcli
from expcli.errors import ExpcliError

EXPCLI = [sys.executable, "-m", "expcli"]
RUN = ["collect", "CartPole-v1", "--envs", "2", "--seed", "7", "--mode", "dummy"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

EVIL = """
import pathlib
pathlib.Path({marker!r}).write_text("ran")
import numpy as np
def act(observations):
    return np.zeros(len(observations), dtype=np.int64)
def wrap(env):
    return env
"""


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Any:
    return subprocess.run([*EXPCLI, *args], capture_output=True, text=True, env=env or ENV, cwd=cwd)


def in_process(*args: str) -> Any:
    """``cli`` in this process, for commands refused before any env or code is built."""
    from typer.testing import CliRunner

    from expcli.cli.app import app

    result = CliRunner().invoke(app, list(args))
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def snapshot(folder: Path) -> dict[str, Any]:
    """Every entry under ``folder``: its kind, mode and (files) the sha256 of its bytes."""
    out: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        out[str(path.relative_to(folder))] = (st.st_mode, st.st_size, digest)
    return out


def edit_manifest(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest, indent=1))


def _target(steps: int) -> Callable[[dict[str, Any]], None]:
    def change(manifest: dict[str, Any]) -> None:
        manifest["collector"]["collect_settings"]["steps"] = steps

    return change


def refused(done: Any) -> str:
    """The one-line error of a refused command."""
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("resuming ")]  # what it would use
    assert len(lines) == 1, done.stderr
    return " ".join(lines)


@pytest.fixture(scope="module")
def complete(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 400-step run of two envs, done, with an episode running in its last row."""
    folder = tmp_path_factory.mktemp("complete") / "run"
    done = cli(*RUN, "--steps", "400", "-o", str(folder), "--shard-size", "50", "-q")
    assert done.returncode == 0, done.stderr
    last = expcli.load(folder).tensors
    assert not (last["terminated"][-1] | last["truncated"][-1]).all()
    return folder


@pytest.fixture
def killed(complete: Path, tmp_path: Path) -> Path:
    """The same folder as a kill leaves it: 400 of 800 steps stored."""
    folder = tmp_path / "run"
    shutil.copytree(complete, folder)
    edit_manifest(folder, _target(800))
    return folder


def _evil(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.py"
    evil.write_text(EVIL.format(marker=str(marker)))
    (tmp_path / "evilmod.py").write_text(EVIL.format(marker=str(marker)))
    return evil, marker


@pytest.mark.parametrize("setting", ["policy", "wrappers", "env_id", "env_kwargs"])
def test_a_resume_runs_no_code_the_folder_names(killed: Path, tmp_path: Path, setting: str) -> None:
    evil, marker = _evil(tmp_path)
    code = {
        "policy": f"{evil}:act",
        "wrappers": [f"{evil}:wrap"],
        "env_id": "evilmod:CartPole-v1",
        "env_kwargs": {"factory": "evilmod:act"},
    }[setting]

    def change(manifest: dict[str, Any]) -> None:
        manifest["collector"]["collect_settings"][setting] = code

    edit_manifest(killed, change)
    before = snapshot(killed)
    message = refused(cli("collect", "--resume", str(killed), cwd=tmp_path))
    assert "--trust-settings" in message and "nothing was run" in message
    assert not marker.exists()
    assert snapshot(killed) == before


def test_code_given_again_or_trusted_runs(killed: Path, tmp_path: Path) -> None:
    evil, marker = _evil(tmp_path)
    edit_manifest(killed, lambda m: m["collector"]["collect_settings"].update(policy=f"{evil}:act"))
    done = cli("collect", "--resume", str(killed), "--trust-settings", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert marker.exists() and len(expcli.load(killed)) == 800
    marker.unlink()
    edit_manifest(killed, _target(1000))
    done = cli("collect", "--resume", str(killed), "--policy", f"{evil}:act", "-q")
    assert done.returncode == 0, done.stderr
    assert marker.exists() and len(expcli.load(killed)) == 1000


@pytest.mark.parametrize(
    "options",
    [
        ["--envs", "8"],
        ["--seed", "99"],
        ["--policy", "nope.py:act"],
        ["--envs", "8", "--seed", "99", "--policy", "nope.py:act"],
        ["--rewards-dtype", "float64"],
        ["--steps", "100"],
        ["-o", "elsewhere.npz"],
        ["Pendulum-v1"],
    ],
)
def test_options_that_conflict_with_the_recorded_run_are_refused(
    killed: Path, options: list[str]
) -> None:
    before = snapshot(killed)
    message = refused(in_process("collect", "--resume", str(killed), *options))
    assert options[0].lstrip("-") in message
    assert snapshot(killed) == before


def test_a_refused_resume_changes_nothing(complete: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(complete, folder)
    before = snapshot(folder)
    assert "nothing to resume" in refused(in_process("collect", "--resume", str(folder)))
    assert snapshot(folder) == before


def test_steps_with_resume_sets_the_new_total(complete: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(complete, folder)
    done = cli("collect", "--resume", str(folder), "--steps", "800", "--seed", "7")
    assert done.returncode == 0, done.stderr
    assert "recorded settings: CartPole-v1, 2 envs, policy random" in done.stderr
    dataset = expcli.load(folder)
    assert len(dataset) == 800
    assert dataset.metadata["collector"]["collect_settings"]["steps"] == 800


def test_a_damaged_last_shard_is_not_resumed_over(killed: Path) -> None:
    last = sorted(killed.glob("shard-*.npz"))[-1]
    data = bytearray(last.read_bytes())
    data[10] ^= 0x01  # a member's time in its zip header: it reads, but fails --check
    last.write_bytes(bytes(data))
    before = snapshot(killed)
    assert "damaged" in refused(cli("collect", "--resume", str(killed)))
    assert snapshot(killed) == before
    assert cli("inspect", "--check", str(killed)).returncode != 0


def test_a_rewards_dtype_the_folder_does_not_hold_is_refused(killed: Path) -> None:
    edit_manifest(
        killed, lambda m: m["collector"]["collect_settings"].update(rewards_dtype="float64")
    )
    before = snapshot(killed)
    assert "rewards" in refused(cli("collect", "--resume", str(killed)))
    assert snapshot(killed) == before


SHAPED = """
import os
import gymnasium as gym
import numpy as np

class Shaped(gym.Env):
    def __init__(self):
        n = int(os.environ["SHAPE"])
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (n,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(self.observation_space.shape, np.float32), {}
    def step(self, action):
        return np.zeros(self.observation_space.shape, np.float32), 1.0, False, False, {}

gym.register("Shaped-v0", entry_point=Shaped, max_episode_steps=50)
"""


def test_an_env_whose_observations_changed_is_refused(tmp_path: Path) -> None:
    (tmp_path / "shapedenv.py").write_text(SHAPED)
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]), "SHAPE": "3"}
    folder = tmp_path / "run"
    run = ["collect", "shapedenv:Shaped-v0", "--mode", "dummy", "--seed", "1"]
    done = cli(*run, "--steps", "100", "-o", str(folder), "-q", env=env)
    assert done.returncode == 0, done.stderr
    edit_manifest(folder, _target(200))
    before = snapshot(folder)
    again = cli(
        "collect", "shapedenv:Shaped-v0", "--resume", str(folder), env={**env, "SHAPE": "4"}
    )
    assert "observations" in refused(again)
    assert snapshot(folder) == before


POLICY = """
import numpy as np
def act(observations):
    return np.zeros(len(observations), dtype=np.int64)
"""


def test_an_edited_policy_file_is_refused_unless_given_again(tmp_path: Path) -> None:
    (tmp_path / "pol.py").write_text(POLICY)
    folder = tmp_path / "run"
    done = cli(*RUN, "--policy", "pol.py:act", "--steps", "100", "-o", "run", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    edit_manifest(folder, _target(200))
    (tmp_path / "pol.py").write_text(POLICY + "# edited\n")
    before = snapshot(folder)
    message = refused(cli("collect", "--resume", "run", "--trust-settings", cwd=tmp_path))
    assert "sha256" in message and "--policy 'pol.py:act'" in message
    assert snapshot(folder) == before
    done = cli("collect", "--resume", "run", "--policy", "pol.py:act", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    policy = expcli.load(folder).metadata["collector"]["policy"]
    assert policy["sha256"] == hashlib.sha256((tmp_path / "pol.py").read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("env_id", 5),
        ("envs", 0),
        ("envs", 10**12),
        ("policy", ["random"]),
        ("steps", "many"),
        ("mode", "warp"),
        ("segment_seed", -1),
        ("segment_seed", "x"),
        ("segment_seed", 2**70),
        ("env_steps", "many"),
    ],
)
def test_bad_recorded_settings_are_refused_naming_the_manifest(
    killed: Path, key: str, value: Any
) -> None:
    def change(manifest: dict[str, Any]) -> None:
        if key == "segment_seed":
            manifest["collector"]["segments"][0]["seed"] = value
        elif key == "env_steps":
            manifest["collector"][key] = value
        else:
            manifest["collector"]["collect_settings"][key] = value

    edit_manifest(killed, change)
    before = snapshot(killed)
    message = refused(in_process("collect", "--resume", str(killed)))
    assert "manifest.json" in message
    assert snapshot(killed) == before


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("env_id", "NoSuchEnv-v9", "unknown env id 'NoSuchEnv-v9'"),
        ("env_kwargs", {"bogus_kw": 1}, "bogus_kw"),
    ],
)
def test_recorded_env_settings_that_fail_name_the_manifest(
    killed: Path, key: str, value: Any, says: str
) -> None:
    """The env they describe cannot be made: the error says where that came from."""
    edit_manifest(killed, lambda m: m["collector"]["collect_settings"].update({key: value}))
    before = snapshot(killed)
    message = refused(cli("collect", "--resume", str(killed)))
    assert f"{killed / 'manifest.json'}: 'collector.collect_settings': " in message
    assert says in message
    assert snapshot(killed) == before


def test_code_settings_name_what_would_import() -> None:
    from expcli.collect.resume_trust import code_settings

    assert code_settings({"policy": "random", "env_id": "CartPole-v1", "env_kwargs": {}}) == {}
    found = code_settings(
        {
            "policy": "a.b:act",
            "wrappers": ["w.py:f"],
            "env_id": "ale_py:ALE/Pong-v5",
            "env_kwargs": {"x": [1, {"y": "pkg.mod:Thing"}], "render_mode": "rgb_array"},
        }
    )
    assert set(found) == {"policy", "wrappers", "env_id", "env_kwargs"}
    assert code_settings({"env_kwargs": {"render_mode": "rgb_array", "t": "12:30"}}) == {}


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    key=st.sampled_from(
        [
            "env_id",
            "envs",
            "steps",
            "episodes",
            "policy",
            "wrappers",
            "seed",
            "env_kwargs",
            "mode",
            "asynchronous",
            "rewards_dtype",
            "shard_size",
            "step_timeout",
            "chunk_timeout",
            "infos",
            "segment_seed",
        ]
    ),
    value=_JSON,
)
def test_any_recorded_value_is_taken_or_refused_in_one_error(
    complete: Path, tmp_path_factory: pytest.TempPathFactory, key: str, value: Any
) -> None:
    from expcli.collect.resume import resume_settings

    folder = tmp_path_factory.mktemp("fuzz")
    manifest = json.loads((complete / "manifest.json").read_text())
    manifest["collector"]["collect_settings"]["steps"] = 10**6  # something left to collect
    if key == "segment_seed":
        manifest["collector"]["segments"][0]["seed"] = value
    else:
        manifest["collector"]["collect_settings"][key] = value
    (folder / "manifest.json").write_text(json.dumps(manifest))
    try:
        settings = resume_settings(folder, trust=True)
    except ExpcliError:
        return
    assert settings.resuming and settings.output == folder
