"""What an env returns is checked against its spaces in every mode, the same way."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import EnvError, ParallelEnv, load
from expcli.cli.app import app
from tests.envs.conftest import LOCAL_MODES, third_step_error
from tests.envs.misbehaving_ids import MISBEHAVING_ID
from tests.envs.toy_envs import misbehaving

# how -> what the message says (the env returns it from its 3rd step on)
BAD_RESULTS = {
    "shape": "an observation of shape (2,) (expected Box(-inf, inf, (3,), float64))",
    "scalar_obs": "an observation of shape () (expected Box(-inf, inf, (3,), float64))",
    "str_obs": "a str observation 'abc'",
    "none_obs": "None as the observation (expected Box(-inf, inf, (3,), float64))",
    "str_reward": "a reward of type str '1.5' (expected a number)",
    "none_reward": "a reward of type NoneType None (expected a number)",
    "array_reward": "a reward of type ndarray of shape (1,)",
    "none_flag": "terminated=None of type NoneType (expected a bool)",
    "list_info": "an info [1] (expected a dict)",
}


def _fail_at_third_step(para_mode: str, how: str) -> EnvError:
    factories = [
        functools.partial(misbehaving, how, at=3 if i == 1 else 1000, tag=i) for i in range(3)
    ]
    return third_step_error(ParallelEnv(factories, para_mode, "restart", num_cpus=2))[0]


@pytest.mark.parametrize("how", sorted(BAD_RESULTS))
def test_a_bad_result_is_refused_alike_in_every_mode(how: str) -> None:
    messages = set()
    for para_mode in LOCAL_MODES:
        error = _fail_at_third_step(para_mode, how)
        assert error.index == 1
        assert str(error).startswith("env 1: step() returned ")
        assert BAD_RESULTS[how] in str(error) and "at step 3 of its episode" in str(error)
        messages.add(str(error))
    assert len(messages) == 1, messages


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_acceptable_results_are_stored_as_gymnasium_gives_them(para_mode: str) -> None:
    """A float32 observation of a float64 Box, numpy rewards and flags: stored, converted."""
    factories = [functools.partial(misbehaving, "float_obs", at=2, tag=i) for i in range(2)]
    reference = [misbehaving("float_obs", at=2, tag=i) for i in range(2)]
    expected = [env.reset(seed=7 + i)[0] for i, env in enumerate(reference)]
    with ParallelEnv(factories, para_mode, "restart", num_cpus=2) as penv:
        obs, _ = penv.reset(seed=7)
        np.testing.assert_array_equal(obs, np.stack(expected))
        for _ in range(4):
            by_hand = [env.step(1) for env in reference]
            obs, rewards, terminated, _, _ = penv.step([1, 1])
            assert obs.dtype == np.float64
            np.testing.assert_array_equal(obs, np.stack([np.float64(r[0]) for r in by_hand]))
            np.testing.assert_array_equal(rewards, [r[1] for r in by_hand])
            assert terminated.tolist() == [r[2] for r in by_hand]


class _NumpyTyped(gym.Wrapper[Any, Any, Any, Any]):
    """Rewards as numpy float32 and flags as numpy bools, as many envs return them."""

    def step(self, action: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, np.float32(reward), np.bool_(terminated), np.bool_(truncated), info


def _numpy_typed_cartpole() -> gym.Env[Any, Any]:
    return _NumpyTyped(gym.make("CartPole-v1"))


def test_numpy_scalars_pass() -> None:
    with ParallelEnv([_numpy_typed_cartpole] * 2, "dummy", "restart") as penv:
        penv.reset(seed=0)
        for _ in range(30):
            _, rewards, *_ = penv.step([0, 1])
        assert (rewards == 1.0).all()


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_restart_on_error_also_restarts_an_env_with_a_bad_result(para_mode: str) -> None:
    factories = [
        functools.partial(misbehaving, "none_obs", at=2 if i == 0 else 1000, tag=i)
        for i in range(2)
    ]
    with ParallelEnv(factories, para_mode, "restart", num_cpus=2, restart_on_error=True) as penv:
        penv.reset(seed=0)
        penv.step([0, 0])
        obs, _, _, truncated, infos = penv.step([0, 0])
        assert truncated.tolist() == [True, False]
        assert "None as the observation" in infos[0]["env_error"]
        assert not np.isnan(obs).any() and penv.restarts == 1


def test_a_reset_that_returns_none_is_refused() -> None:
    class NoneReset(gym.Env[Any, int]):
        observation_space = gym.spaces.Box(0, 1, (2,))
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
            return None, {}

    penv = ParallelEnv([NoneReset], "dummy")
    with pytest.raises(EnvError, match=r"env 0: reset\(\) returned None as the observation"):
        penv.reset()


@pytest.mark.parametrize("mode", LOCAL_MODES)
def test_collect_refuses_a_none_observation_and_saves_what_came_before(
    tmp_path: Any, mode: str
) -> None:
    out = tmp_path / "none.npz"
    args = ["collect", MISBEHAVING_ID, "--env-kwargs", '{"how": "none_obs", "at": 5}']
    result = CliRunner().invoke(
        app, [*args, "--envs", "2", "--steps", "100", "--mode", mode, "-o", str(out)]
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.stderr
    assert "error: env 0: step() returned None as the observation" in result.stderr
    dataset = load(out)
    assert len(dataset) == 8  # 4 rows of 2 envs, before step 5
    assert not np.isnan(np.asarray(dataset.tensors["next_observations"])).any()


@pytest.mark.parametrize("mode", LOCAL_MODES)
def test_a_factory_that_raises_is_one_line_in_every_mode(mode: str) -> None:
    args = ["collect", MISBEHAVING_ID, "--env-kwargs", '{"bad": 1}']
    result = CliRunner().invoke(app, [*args, "--envs", "2", "--steps", "10", "--mode", mode])
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: env 0: make() raised TypeError: ")
    assert "unexpected keyword argument 'bad'" in line
