"""ParallelEnv semantics in the local modes, against gymnasium envs stepped by hand."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from expcli import ConfigError, EnvError, ParallelEnv
from tests.envs.conftest import LOCAL_MODES, counting_factories
from tests.envs.toy_envs import DictEnv

ASYNC = [None, "idle", "restart", "continue"]


def reference_rollout(env_id: str, n: int, mode: str | None, actions: np.ndarray) -> list[Any]:
    """Step ``n`` gymnasium envs by hand, applying the asynchronous mode's rules."""
    envs = [gym.make(env_id) for _ in range(n)]
    with warnings.catch_warnings():  # stepping a finished CartPole ("continue") warns
        warnings.simplefilter("ignore")
        return _reference_steps(envs, mode, actions)


def _reference_steps(envs: list[Any], mode: str | None, actions: np.ndarray) -> list[Any]:
    n = len(envs)
    try:
        [env.reset(seed=100 + i) for i, env in enumerate(envs)]
        done = np.zeros(n, bool)
        steps = []
        for row in actions:
            out = []
            for i, env in enumerate(envs):
                if (mode is None and done.any()) or (mode == "idle" and done[i]):
                    out.append((None, None, True, False, {}))
                    continue
                obs, reward, term, trunc, info = env.step(int(row[i]))
                if mode == "restart" and (term or trunc):
                    info = {**info, "ended_state": obs, "reset": True}
                    obs, _ = env.reset()
                out.append((obs, reward, term, trunc, info))
            finished = np.array([o[2] or o[3] for o in out])
            if mode is None:
                done |= finished.any()
            elif mode == "idle":
                done |= finished
            steps.append(out)
        return steps
    finally:
        for env in envs:
            env.close()


@pytest.mark.parametrize("asynchronous", ASYNC)
@pytest.mark.parametrize("para_mode", LOCAL_MODES)
@pytest.mark.parametrize(("env_id", "steps"), [("CartPole-v1", 80), ("Acrobot-v1", 30)])
def test_modes_match_gymnasium_by_hand(
    para_mode: str, asynchronous: str | None, env_id: str, steps: int
) -> None:
    n = 4
    actions = np.random.default_rng(1).integers(0, 2, (steps, n))
    if env_id == "CartPole-v1":
        actions[:, 0] = 1  # push one pole over early, so every mode meets episode ends
    expected = reference_rollout(env_id, n, asynchronous, actions)
    with ParallelEnv.from_id(env_id, n, para_mode, asynchronous, seed=100, num_cpus=2) as penv:
        penv.reset()
        for t, row in enumerate(actions):
            got = penv.step(row, align="batch")
            for i, (want, have) in enumerate(zip(expected[t], got, strict=True)):
                assert_same_transition(want, have, where=f"step {t} env {i}")


def assert_same_transition(want: tuple[Any, ...], have: tuple[Any, ...], where: str) -> None:
    obs, reward, term, trunc, info = have
    if want[0] is None:
        assert obs is None and reward is None and term and not trunc and info == {}, where
        return
    np.testing.assert_array_equal(obs, want[0], err_msg=where)
    assert (reward, bool(term), bool(trunc)) == (want[1], want[2], want[3]), where
    assert info.keys() == want[4].keys(), where
    if "ended_state" in want[4]:
        np.testing.assert_array_equal(info["ended_state"], want[4]["ended_state"], err_msg=where)


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_step_result_types(para_mode: str, make_penv: Any) -> None:
    penv = make_penv(counting_factories(3), para_mode, "restart")
    obs, infos = penv.reset(seed=7)
    assert isinstance(obs, np.ndarray) and obs.shape == (3, 3) and len(infos) == 3
    obs, rewards, terminated, truncated, infos = penv.step([0, 1, 2])
    assert obs.shape == (3, 3) and rewards.dtype == np.float64
    assert rewards.tolist() == [1.0, 2.0, 3.0]
    assert terminated.dtype == bool and truncated.dtype == bool
    assert isinstance(infos, list) and infos == [{}, {}, {}]
    batch = penv.step([0, 0, 0], align="batch")
    assert len(batch) == 3 and all(len(item) == 5 for item in batch)
    assert batch[0][4] == {"t": 2}


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_ids_select_envs(para_mode: str, make_penv: Any) -> None:
    penv = make_penv(counting_factories(4, horizons=[50] * 4), para_mode, "continue", num_cpus=2)
    penv.reset(seed=0)
    obs, rewards, *_ = penv.step([2, 1], id=[3, 0])
    assert obs[:, 2].tolist() == [3.0, 0.0] and rewards.tolist() == [3.0, 2.0]
    obs, reward, term, trunc, info = penv.step(1, id=2)
    assert obs.tolist()[0] == 1.0 and reward == 2.0 and not term
    obs, _ = penv.reset()
    assert obs[:, 0].tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_reset_seeds_and_seed(para_mode: str, make_penv: Any) -> None:
    penv = make_penv(counting_factories(3), para_mode)
    a, _ = penv.reset(seed=5)
    b, _ = penv.reset(seed=[5, 6, 7])
    np.testing.assert_array_equal(a, b)
    c, _ = penv.reset(id=[1], seed=6)
    assert c[0, 1] == a[1, 1]
    assert penv.seed(5) == [5, 6, 7]
    d, _ = penv.reset()
    np.testing.assert_array_equal(a, d)
    obs, infos = penv.reset(id=0, options={"start": 42.0})
    assert obs[1] == 42.0 and infos == {"start": 42.0}
    with pytest.raises(ConfigError, match="3 seeds"):
        penv.reset(seed=[1, 2])


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_attributes_and_methods(para_mode: str, make_penv: Any) -> None:
    penv = make_penv(counting_factories(3), para_mode, num_cpus=2)
    assert penv.get_env_attr("greeting") == ["hello"] * 3
    assert penv.get_env_attr("tag", 2) == 2
    assert penv.get_env_attr("no_such_attribute") == [None] * 3
    penv.set_env_attr("greeting", "bye", id=[0, 2])
    assert penv.get_env_attr("greeting") == ["bye", "hello", "bye"]
    assert penv.customized_method("add", {"x": 10}) == [10, 11, 12]
    assert penv.customized_method("add", [{"x": 1}, {"x": 2, "y": 3}], id=[2, 0]) == [3, 5]
    assert penv.customized_method("add", {"x": 1}, id=1) == 2
    with pytest.raises(ConfigError, match="2 argument dicts"):
        penv.customized_method("add", [{"x": 1}], id=[0, 1])


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_done_tracking_per_asynchronous_mode(para_mode: str, make_penv: Any) -> None:
    horizons = [2, 4]
    none = make_penv(counting_factories(2, horizons), para_mode, None)
    idle = make_penv(counting_factories(2, horizons), para_mode, "idle")
    restart = make_penv(counting_factories(2, horizons), para_mode, "restart")
    for penv in (none, idle, restart):
        penv.reset()
        penv.step([0, 0])
        assert not penv.has_done()
        penv.step([0, 0])
    assert none.has_done() and none.all_done()
    assert idle.has_done() and not idle.all_done()
    assert restart.has_done() and not restart.all_done()
    obs, rewards, terminated, _, _ = idle.step([0, 0])
    assert obs[0] is None and rewards[0] is None and terminated[0]
    assert obs[1].tolist()[0] == 3.0 and rewards[1] == 3.0
    idle.reset(id=0)
    assert not idle.has_done()


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_dict_observations(para_mode: str, make_penv: Any) -> None:
    penv = make_penv(
        [lambda i=i: DictEnv(tag=i, horizon=2) for i in range(3)], para_mode, "restart", num_cpus=2
    )
    obs, _ = penv.reset(seed=1)
    assert isinstance(obs, list) and obs[2]["pos"][1] == 2.0
    obs, _, terminated, _, infos = penv.step([0, 0, 0])
    obs, _, terminated, _, infos = penv.step([0, 0, 0])
    assert terminated.all() and obs[0]["t"] == 0 and infos[0]["ended_state"]["t"] == 2


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_rollout_records_true_final_observations(para_mode: str, make_penv: Any) -> None:
    penv = make_penv(counting_factories(2, [3, 4]), para_mode, "restart")
    data = penv.rollout(lambda obs: np.zeros(len(obs), int), 6)
    assert data["observations"].shape == (6, 2, 3) and data["actions"].shape == (6, 2)
    assert data["terminated"][:, 0].tolist() == [False, False, True, False, False, True]
    # where env 0 ended, next_observations holds t == 3, not the reset observation
    assert data["next_observations"][2, 0, 0] == 3.0 and data["observations"][3, 0, 0] == 0.0
    np.testing.assert_array_equal(data["next_observations"][:2], data["observations"][1:3])


def test_rollout_with_random_policy_and_early_stop(make_penv: Any) -> None:
    penv = make_penv(counting_factories(2, [2, 9]), "dummy", None)
    data = penv.rollout(None, 10)
    assert data["rewards"].shape == (2, 2)  # every env done after step 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"para_mode": "threads"}, "unknown para_mode"),
        ({"asynchronous": "sometimes"}, "unknown asynchronous"),
        ({"num_cpus": 0}, "num_cpus"),
    ],
)
def test_bad_arguments_fail_before_any_env_is_built(kwargs: dict[str, Any], message: str) -> None:
    built = []

    def factory() -> gym.Env[Any, Any]:
        built.append(1)
        raise AssertionError("must not be built")

    with pytest.raises(ConfigError, match=message):
        ParallelEnv([factory], **kwargs)
    assert built == []


def test_empty_and_non_env_arguments() -> None:
    with pytest.raises(ConfigError, match="at least one"):
        ParallelEnv([])
    with pytest.raises(ConfigError, match="gymnasium.Env"):
        ParallelEnv([42])  # type: ignore[list-item]


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_bad_calls_raise_config_errors(para_mode: str, make_penv: Any) -> None:
    penv = make_penv(counting_factories(3), para_mode)
    penv.reset()
    with pytest.raises(ConfigError, match="expected 3 actions"):
        penv.step([0, 0])
    with pytest.raises(ConfigError, match="expected 3 actions"):
        penv.step(0)
    with pytest.raises(ConfigError, match=r"0\.\.2"):
        penv.step([0], id=[3])
    with pytest.raises(ConfigError, match="repeat"):
        penv.step([0, 0], id=[1, 1])
    with pytest.raises(ConfigError, match="align"):
        penv.step([0, 0, 0], align="rows")  # type: ignore[arg-type]
    assert not penv.closed  # argument errors leave the envs running
    penv.step([0, 0, 0])


def test_unknown_env_id_suggests_a_name() -> None:
    with pytest.raises(ConfigError, match="did you mean 'CartPole-v1'"):
        ParallelEnv.from_id("CartPole-v7")
    with pytest.raises(ConfigError, match="num_envs"):
        ParallelEnv.from_id("CartPole-v1", num_envs=0)


def test_spaces_len_and_context_manager() -> None:
    with ParallelEnv.from_id("CartPole-v1", 3) as penv:
        assert len(penv) == 3
        assert penv.observation_space == gym.make("CartPole-v1").observation_space
        assert penv.action_space == gym.spaces.Discrete(2)
    assert penv.closed
    penv.close()
    with pytest.raises(EnvError, match="closed"):
        penv.step([0, 0, 0])


def test_env_instances_are_accepted(make_penv: Any) -> None:
    envs = [gym.make("CartPole-v1") for _ in range(2)]
    for para_mode in LOCAL_MODES:
        penv = make_penv(envs, para_mode)
        obs, _ = penv.reset(seed=3)
        assert obs.shape == (2, 4)


def test_modes_are_typed_and_asynchronous_is_checked_when_set() -> None:
    """Members and spellings alike; a bad mode set later is refused, not stepped with."""
    from expcli.envs.modes import AsyncMode, EnvMode

    with ParallelEnv(counting_factories(2, [3, 3]), "dummy", "IDLE".lower()) as penv:
        assert penv.para_mode is EnvMode.DUMMY
        assert penv.asynchronous is AsyncMode.IDLE
        penv.asynchronous = "None"
        assert penv.asynchronous is None
        penv.asynchronous = AsyncMode.RESTART
        assert penv.asynchronous == "restart"
        with pytest.raises(ConfigError, match="unknown asynchronous mode 'sometimes'"):
            penv.asynchronous = "sometimes"
        assert penv.asynchronous is AsyncMode.RESTART
