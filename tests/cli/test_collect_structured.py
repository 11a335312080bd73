"""``expcli collect`` of Dict, Tuple and non-numeric spaces: leaves, wrappers, policies.

MiniGrid's observations hold a ``MissionSpace`` string: refused in one line naming the leaf
and the wrapper that fixes it, and collected once that wrapper is given.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import load
from expcli.cli.app import app
from tests.collect.structured_envs import ARM, PHASE, registry_kept

MINIGRID = "minigrid:MiniGrid-Empty-5x5-v0"
PHASE_ID = f"tests.collect.structured_envs:{PHASE}"
ARM_ID = f"tests.collect.structured_envs:{ARM}"


def run(*args: str) -> object:
    with registry_kept():  # MiniGrid registers its envs in this process
        return CliRunner().invoke(app, ["collect", *args])


def ok(*args: str) -> object:
    result = run(*args)
    assert result.exit_code == 0, result.stderr + result.stdout  # type: ignore[attr-defined]
    return result


def one_line_error(result: object, code: int = 2) -> str:
    assert result.exit_code == code, result.stdout  # type: ignore[attr-defined]
    stderr: str = result.stderr  # type: ignore[attr-defined]
    assert stderr.strip().count("\n") == 0 and "Traceback" not in stderr, stderr
    return stderr


def test_minigrid_is_refused_in_one_line_naming_the_leaf_and_the_wrapper(tmp_path: Path) -> None:
    out = tmp_path / "mg.npz"
    result = run(MINIGRID, "--envs", "2", "--steps", "20", "-o", str(out))
    message = one_line_error(result)
    assert "observations/mission is a MissionSpace space" in message
    assert "--wrapper minigrid.wrappers:ImgObsWrapper" in message
    assert not out.exists()


@pytest.mark.parametrize("mode", ["dummy", "subproc"])
def test_a_wrapper_makes_minigrid_collectable(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "mg.npz"
    wrapper = "minigrid.wrappers:ImgObsWrapper"
    ok(
        MINIGRID,
        "--envs",
        "2",
        "--steps",
        "20",
        "--mode",
        mode,
        "--wrapper",
        wrapper,
        "-o",
        str(out),
    )
    dataset = load(out)
    assert dataset.tensors["observations"].shape == (10, 2, 7, 7, 3)
    assert dataset.metadata["wrappers"] == [
        {"spec": wrapper, "name": "ImgObsWrapper", "module": "minigrid.wrappers"}
    ]
    assert dataset.metadata["observation_space"]["type"] == "Box"


WRAPPERS = """
    import gymnasium as gym
    from gymnasium.wrappers import FilterObservation, TransformReward

    def positions(env):
        return FilterObservation(env, ["pos"])

    def doubled(env):
        return TransformReward(env, lambda r: 2 * r)

    def not_an_env(env):
        return 3
"""


@pytest.mark.parametrize("mode", ["dummy", "subproc"])
def test_file_wrappers_apply_in_order_inside_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    (tmp_path / "wrap.py").write_text(textwrap.dedent(WRAPPERS))
    monkeypatch.chdir(tmp_path)
    common = ["--envs", "2", "--steps", "16", "--seed", "3", "--mode", mode]
    ok(PHASE_ID, *common, "-o", "plain.npz", "--rewards-dtype", "float64")
    wrapped = ["--wrapper", "wrap.py:positions", "--wrapper", "wrap.py:doubled"]
    ok(PHASE_ID, *common, *wrapped, "-o", "w.npz", "--rewards-dtype", "float64")
    plain, dataset = load(tmp_path / "plain.npz"), load(tmp_path / "w.npz")
    assert sorted(n for n in dataset.tensors if "observations" in n) == [
        "next_observations/pos",
        "observations/pos",
    ]
    np.testing.assert_array_equal(
        dataset.tensors["observations/pos"], plain.tensors["observations/pos"]
    )
    np.testing.assert_array_equal(dataset.tensors["rewards"], 2 * plain.tensors["rewards"])
    described = dataset.metadata["wrappers"]
    assert [w["name"] for w in described] == ["positions", "doubled"]
    assert described[0]["file"] == str((tmp_path / "wrap.py").resolve())
    assert len(described[0]["sha256"]) == 64
    config = tmp_path / "c.toml"
    config.write_text(f'env = "{PHASE_ID}"\nwrapper = ["wrap.py:positions"]\nsteps = 4\n')
    ok("--config", str(config), "--mode", mode, "-o", "c.npz")
    assert "observations/phase" not in load(tmp_path / "c.npz").tensors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--wrapper", "no_such_module:wrap"], "wrapper 'no_such_module:wrap': no module named"),
        (["--wrapper", "wrap.py:nope"], "wrapper 'wrap.py:nope': 'wrap.py' has no attribute"),
        (["--wrapper", "missing.py:x"], "wrapper file 'missing.py' not found"),
        (["--wrapper", "wrap.py:not_an_env"], "returned int; expected a gymnasium Env"),
        (["--wrapper", "wrap.py:doubled", "--mode", "vector"], "--wrapper"),
        (["--rewards-dtype", "float16"], "--rewards-dtype must be one of float32, float64"),
    ],
)
def test_bad_wrappers_and_reward_dtypes_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    (tmp_path / "wrap.py").write_text(textwrap.dedent(WRAPPERS))
    monkeypatch.chdir(tmp_path)
    env_id = "CartPole-v1" if "vector" in args else PHASE_ID
    result = run(
        env_id, "--steps", "8", "--mode", "dummy" if "vector" not in args else "vector", *args
    )
    code = 1 if "wrap.py:not_an_env" in args else 2  # found only when an env is built
    assert message in one_line_error(result, code)


def test_rewards_keep_float64_when_asked(tmp_path: Path) -> None:
    common = [PHASE_ID, "--envs", "2", "--steps", "20", "--seed", "1", "--mode", "dummy"]
    ok(*common, "-o", str(tmp_path / "32.npz"))
    ok(*common, "--rewards-dtype", "float64", "-o", str(tmp_path / "64.npz"))
    narrow, wide = load(tmp_path / "32.npz"), load(tmp_path / "64.npz")
    assert narrow.tensors["rewards"].dtype == np.float32
    assert wide.tensors["rewards"].dtype == np.float64
    np.testing.assert_array_equal(
        narrow.tensors["rewards"], wide.tensors["rewards"].astype(np.float32)
    )
    changed = int((wide.tensors["rewards"].astype(np.float32) != wide.tensors["rewards"]).sum())
    assert narrow.metadata["rewards"] == {
        "dtype": "float32",
        "env_dtype": "float64",
        "narrowed": True,
        "values_changed": changed,
    }
    assert changed > 0 and wide.metadata["rewards"]["narrowed"] is False


POLICY = """
    import numpy as np

    seen = []

    def act(obs):
        assert isinstance(obs, tuple) and len(obs) == 2, type(obs)
        box, k = obs
        assert box.shape == (3, 3) and box.dtype == np.float32, (box.shape, box.dtype)
        assert k.shape == (3,) and k.dtype == np.int64, (k.shape, k.dtype)
        return {"move": ((k + 1) % 3).astype(np.int32), "force": np.tanh(box[:, :2]).astype(float)}
"""


def test_a_callable_policy_gets_and_gives_batched_structures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "armpolicy.py").write_text(textwrap.dedent(POLICY))
    monkeypatch.chdir(tmp_path)
    args = [ARM_ID, "--envs", "3", "--steps", "30", "--mode", "subproc", "--seed", "0"]
    ok(*args, "--policy", "armpolicy.py:act", "-o", "arm.h5")
    dataset = load(tmp_path / "arm.h5")
    t = dataset.tensors
    np.testing.assert_array_equal(t["actions/move"][..., 0], (t["observations/1"][..., 0] + 1) % 3)
    assert len(np.unique(t["actions/move"])) > 1
    np.testing.assert_array_equal(
        t["actions/force"], np.tanh(t["observations/0"][..., :2]).astype(np.float32)
    )
    nested = dataset.structured("actions")
    assert set(nested) == {"move", "force"}
    inspect = CliRunner().invoke(app, ["inspect", str(tmp_path / "arm.h5"), "--check", "--json"])
    assert inspect.exit_code == 0, inspect.stdout
    checks = {c["check"]: c["status"] for c in json.loads(inspect.stdout)["checks"]}
    assert checks["action_space"] == checks["observation_space"] == "passed"
