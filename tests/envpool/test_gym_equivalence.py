"""Where ``auto`` may run EnvPool: its env is, step for step, the env ``gym.make`` builds.

For every id of ``GYM_EQUIVALENT_IDS``, expcli's EnvPool stepper and ``gym.make(id)`` start
from the same state (EnvPool's own, replayed from its generator) and take the same actions;
observations, rewards (as stored, float32) and both flags must agree bit for bit, and so
must every reset state. The same comparison finds CartPole apart (negative control): the
check can fail, and that is why CartPole is not on the list.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from expcli.collect.env_modes import candidate_modes, choose_mode
from expcli.collect.envpool_stepper import EnvPoolStepper
from expcli.envs.envpool_envs import GYM_EQUIVALENT_IDS, make_envpool_envs
from tests.envpool.reference import StdUniform, initial_state

Policy = Callable[[np.ndarray], np.ndarray]


def gym_make(env_id: str, **kwargs: Any) -> Any:
    import gymnasium as gym

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gym.make(env_id, **kwargs)


def set_state(env: Any, env_id: str, state: np.ndarray) -> Any:
    """Put ``env`` (just reset) in ``state``; its observation of it."""
    inner = env.unwrapped
    if env_id.startswith("CliffWalking"):
        inner.s = int(state)
        return int(state)
    inner.state = state.copy()
    return np.asarray(state, dtype=np.float32)


def same(ours: Any, theirs: Any) -> bool:
    return bool(np.asarray(ours).tobytes() == np.asarray(theirs, np.asarray(ours).dtype).tobytes())


def compare(
    env_id: str, policy: Policy, steps: int, *, num_envs: int = 2, seed: int = 11, **kwargs: Any
) -> tuple[list[str], int, int]:
    """Step expcli's EnvPool envs and ``gym.make``'s side by side.

    Returns:
        The mismatches (stopping at the first), and the terminated and truncated counts.
    """
    envs = make_envpool_envs(env_id, num_envs, seed=seed, env_kwargs=kwargs)
    stepper = EnvPoolStepper(envs)
    refs = [gym_make(env_id, **kwargs) for _ in range(num_envs)]
    draws = [StdUniform(seed + i) for i in range(num_envs)]

    def start(i: int) -> Any:
        refs[i].reset(seed=0)
        return set_state(refs[i], env_id, initial_state(env_id, draws[i]))

    try:
        obs = stepper.reset(seed)
        for i in range(num_envs):
            assert same(obs[i], start(i)), "the replayed generator must give EnvPool's state"
        terminated = truncated = 0
        for t in range(steps):
            actions = policy(obs)
            out = stepper.step(actions)
            for i, ref in enumerate(refs):
                o, r, term, trunc, _ = ref.step(actions[i])
                ours = (out.final_obs[i], out.rewards[i], out.terminated[i], out.truncated[i])
                flags = ours[2:] == (term, trunc)
                if not (same(ours[0], o) and ours[1] == np.float32(r) and flags):
                    return [f"step {t} env {i}: expcli {ours} gym.make {(o, r, term, trunc)}"], 0, 0
                if term or trunc:
                    terminated += term
                    truncated += trunc
                    if not same(out.next_obs[i], start(i)):
                        return [f"step {t} env {i}: reset {out.next_obs[i]}"], 0, 0
            obs = out.next_obs
        return [], terminated, truncated
    finally:
        stepper.close()
        for ref in refs:
            ref.close()


def mountain_car(rng: np.random.Generator) -> Policy:
    """Pump energy (reaches the goal), with a third of the actions random."""

    def act(obs: np.ndarray) -> np.ndarray:
        pump = np.where(obs[:, 1] >= 0, 2, 0)
        return np.where(rng.random(len(obs)) < 0.33, rng.integers(0, 3, len(obs)), pump)

    return act


def cliff_walking(rng: np.random.Generator) -> Policy:
    """Mostly right (the goal and the cliff are both that way), else random."""

    def act(obs: np.ndarray) -> np.ndarray:
        return np.where(rng.random(len(obs)) < 0.5, 1, rng.integers(0, 4, len(obs)))

    return act


POLICIES = {"MountainCar-v0": mountain_car, "CliffWalking-v1": cliff_walking}


@pytest.mark.parametrize("env_id", sorted(GYM_EQUIVALENT_IDS))
def test_listed_envs_are_gym_makes_step_for_step(envpool: Any, env_id: str) -> None:
    with warnings.catch_warnings():  # EnvPool's Box bounds are float64, cast to float32
        warnings.simplefilter("ignore")
        pool = envpool.make(env_id, "gymnasium", num_envs=1)
        pool.observation_space  # noqa: B018  (built when first read)
    ref = gym_make(env_id)
    try:
        for mine, theirs in (
            (pool.observation_space, ref.observation_space),
            (pool.action_space, ref.action_space),
        ):
            assert mine == theirs and getattr(mine, "dtype", None) == theirs.dtype
    finally:
        pool.close()
        ref.close()
    mismatches, terminated, truncated = compare(
        env_id, POLICIES[env_id](np.random.default_rng(0)), 1500
    )
    assert mismatches == []
    assert terminated >= 2 and (truncated >= 2 or env_id.startswith("CliffWalking"))


def test_an_episode_ending_on_its_last_step_is_terminated_and_truncated(envpool: Any) -> None:
    """EnvPool alone says truncated only; expcli applies the time limit as TimeLimit does."""

    def pump(obs: np.ndarray) -> np.ndarray:
        return np.where(obs[:, 1] >= 0, 2, 0)

    envs = make_envpool_envs("MountainCar-v0", 1, seed=5)
    stepper = EnvPoolStepper(envs)
    stepper.reset(5)
    obs, length = stepper._obs, 0
    while True:
        out = stepper.step(pump(obs))
        obs, length = out.next_obs, length + 1
        if out.terminated[0] or out.truncated[0]:
            break
    stepper.close()
    assert out.terminated[0] and length < 200
    # The same episode with the limit at its length: the goal is reached on the last step.
    kwargs = {"max_episode_steps": length}
    assert compare("MountainCar-v0", pump, length, num_envs=1, seed=5, **kwargs) == ([], 1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pool = envpool.make("MountainCar-v0", "gymnasium", num_envs=1, seed=5, **kwargs)
        obs, _ = pool.reset()
    for _ in range(length):
        obs, _, term, trunc, _ = pool.step(pump(obs))
    pool.close()
    assert (term[0], trunc[0]) == (False, True)  # what EnvPool alone reports


def test_cartpole_parts_from_gym_make_so_it_is_not_listed(envpool: Any) -> None:
    def balance(obs: np.ndarray) -> np.ndarray:
        return (obs[:, 2] + 0.5 * obs[:, 3] + 0.01 * obs[:, 0] + 0.05 * obs[:, 1] > 0).astype(int)

    assert "CartPole-v1" not in GYM_EQUIVALENT_IDS
    mismatches, _, _ = compare("CartPole-v1", balance, 1500, num_envs=1, seed=0)
    assert mismatches, "CartPole matched gym.make: reconsider GYM_EQUIVALENT_IDS"


def test_auto_tries_envpool_only_for_listed_ids_without_a_seed(envpool: Any) -> None:
    assert "envpool" in candidate_modes("MountainCar-v0", 1, "restart")
    assert "envpool" not in candidate_modes("CartPole-v1", 4, "restart")
    assert "envpool" not in candidate_modes("MountainCar-v0", 4, "continue")
    mode, probes = choose_mode("MountainCar-v0", 1, "restart", {}, seed=0)
    assert mode == "dummy"
    [skipped] = [p for p in probes if p.mode == "envpool"]
    assert skipped.skipped is not None and "--seed" in skipped.skipped
    for kwargs, infos, why in (
        ({"goal_velocity": 0.0}, False, "--env-kwargs"),
        ({}, True, "--infos"),
    ):
        _, probes = choose_mode("MountainCar-v0", 1, "restart", kwargs, infos=infos)
        [skipped] = [p for p in probes if p.mode == "envpool"]
        assert skipped.skipped is not None and why in skipped.skipped
    _, probes = choose_mode("MountainCar-v0", 1, "restart", {})
    [probe] = [p for p in probes if p.mode == "envpool"]
    assert probe.skipped is None and probe.steps_per_second > 0
