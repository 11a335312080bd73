"""``--mode auto`` never changes the data; ``--mode vector`` says how it differs, or refuses."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import load
from expcli.cli.app import app
from expcli.collect.env_modes import choose_mode
from expcli.collect.vector_checks import space_differences, spec_differences
from tests.collect.registered_envs import NO_TIME_LIMIT, OTHER_DEFAULT

PONG = "ale_py:ALE/Pong-v5"


def collect(*args: str) -> object:
    return CliRunner().invoke(app, ["collect", *args])


def tensors(path: Path) -> dict[str, bytes]:
    return {k: np.asarray(v).tobytes() for k, v in load(path).tensors.items()}


def test_the_spec_shows_what_makes_a_vector_env_another_env() -> None:
    assert spec_differences("CartPole-v1", {}) == []
    assert spec_differences(NO_TIME_LIMIT, {}) == [
        "it applies no time limit (max_episode_steps=50)"
    ]
    assert spec_differences(OTHER_DEFAULT, {}) == [
        "sutton_barto_reward=True where gym.make's env has False"
    ]
    assert spec_differences(OTHER_DEFAULT, {"sutton_barto_reward": False}) == []
    [pong] = spec_differences(PONG, {})
    assert "grayscale=True" in pong and "stack_num=4" in pong and "reward_clipping=True" in pong
    assert "it takes no obs_type='grayscale' (from --env-kwargs)" in spec_differences(
        PONG, {"obs_type": "grayscale"}
    )


def test_built_spaces_are_compared_with_gym_make() -> None:
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)
    vector = gym.make_vec("ALE/Pong-v5", 1, vectorization_mode="vector_entry_point")
    try:
        assert space_differences(vector, PONG, {}) == [
            "observation space Box(4, 84, 84) uint8 where gym.make's is Box(210, 160, 3) uint8"
        ]
    finally:
        vector.close()
    vector = gym.make_vec("CartPole-v1", 2, vectorization_mode="vector_entry_point")
    try:
        assert space_differences(vector, "CartPole-v1", {}) == []
    finally:
        vector.close()


def test_auto_skips_vector_where_it_would_change_the_data() -> None:
    mode, probes = choose_mode(PONG, 1, "restart", {})
    assert mode == "dummy"
    [skipped] = [p for p in probes if p.mode == "vector"]
    assert math.isnan(skipped.steps_per_second) and "grayscale=True" in (skipped.skipped or "")
    mode, probes = choose_mode("CartPole-v1", 1, "restart", {}, seed=0)
    assert mode == "dummy"
    assert [(p.mode, p.skipped) for p in probes] == [
        ("dummy", None),
        ("vector", "--seed is given, and its envs draw from their own generator (other bytes)"),
    ]


def test_auto_on_atari_stores_what_gym_make_gives(tmp_path: Path) -> None:
    out = tmp_path / "pong.npz"
    result = collect(PONG, "--envs", "2", "--steps", "8", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    assert "auto: skipped vector: its spec differs from the env gym.make builds" in result.stderr
    dataset = load(out)
    assert dataset.tensors["observations"].shape[2:] == (210, 160, 3)
    collector = dataset.metadata["collector"]
    assert collector["mode"] in ("dummy", "subproc") and collector["forced_mode"] is False
    assert {p["mode"]: p["skipped"] is not None for p in collector["probes"]}["vector"]


def test_env_kwargs_the_vector_env_cannot_take_skip_it(tmp_path: Path) -> None:
    out = tmp_path / "gray.npz"
    result = collect(
        PONG,
        "--envs",
        "2",
        "--steps",
        "8",
        "--env-kwargs",
        '{"obs_type": "grayscale"}',
        "-o",
        str(out),
    )
    assert result.exit_code == 0, result.stderr
    assert load(out).tensors["observations"].shape[2:] == (210, 160)


def test_mode_vector_refuses_another_env_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "vec.npz"
    result = collect(PONG, "--envs", "2", "--steps", "8", "--mode", "vector", "-o", str(out))
    assert result.exit_code == 2 and not out.exists()
    assert result.stderr.startswith(
        "error: --mode vector: the spec of ale_py:ALE/Pong-v5's vector env differs from the env "
        "gym.make builds: settings gym.make's env lacks: img_height=84"
    )
    assert "--force-mode" in result.stderr and result.stderr.count("\n") == 1
    result = collect(
        PONG, "--envs", "2", "--steps", "8", "--mode", "vector", "--force-mode", "-o", str(out)
    )
    assert result.exit_code == 0, result.stderr
    dataset = load(out)
    assert dataset.tensors["observations"].shape[2:] == (4, 84, 84)
    collector = dataset.metadata["collector"]
    assert collector["mode"] == "vector" and collector["forced_mode"] is True
    assert "grayscale=True" in collector["mode_differences"][0]


def test_bipedal_walker_gives_the_same_bytes_in_auto_and_dummy(tmp_path: Path) -> None:
    """BipedalWalker's reset(seed) is not a full reset: auto must not collect with probed envs."""
    runs = {}
    for name, mode in (("auto1", "auto"), ("auto2", "auto"), ("dummy", "dummy")):
        out = tmp_path / f"{name}.npz"
        args = ["--envs", "8", "--steps", "800", "--seed", "0", "--mode", mode, "-o", str(out)]
        result = collect("BipedalWalker-v3", *args)
        assert result.exit_code == 0, result.stderr
        runs[name] = tensors(out)
    assert runs["auto1"] == runs["dummy"] and runs["auto2"] == runs["dummy"]


@pytest.mark.parametrize("seed", ["0", None])
def test_cartpole_auto_picks_vector_only_without_a_seed(tmp_path: Path, seed: str | None) -> None:
    out = tmp_path / "c.npz"
    extra = ["--seed", seed] if seed is not None else []
    result = collect("CartPole-v1", "--envs", "1", "--steps", "8", "-o", str(out), *extra)
    assert result.exit_code == 0, result.stderr
    probes = {p["mode"]: p for p in load(out).metadata["collector"]["probes"]}
    assert (probes["vector"]["skipped"] is None) is (seed is None)


def test_auto_probes_no_longer_than_a_short_run_takes() -> None:
    """A run shorter than a probe takes the first candidate that would finish it sooner."""
    from expcli.collect.env_modes import SHORT_RUN

    start = time.perf_counter()
    mode, probes = choose_mode("CartPole-v1", 1, "restart", {}, steps=50)
    assert mode == "vector"
    assert [(p.mode, p.skipped) for p in probes] == [("vector", None), ("dummy", SHORT_RUN)]
    assert probes[0].steps_per_second > 0
    assert time.perf_counter() - start < 0.3  # no 0.3 s burst: 50 steps, then done
    _, probes = choose_mode("CartPole-v1", 1, "restart", {}, steps=10**9)  # a long run tries both
    assert [p.mode for p in probes if p.skipped is None] == ["vector", "dummy"]
