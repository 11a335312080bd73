"""Dict, Tuple and Text spaces: one tensor per leaf, equal to the envs stepped by hand.

Each test steps Gymnasium envs by hand with the same seeds and actions as the collector
and compares every stored leaf; the policies record what they were given.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from expcli import ParallelEnv, RandomMemory
from expcli.collect import Collector
from expcli.collect.action_checks import check_actions
from expcli.collect.policies import CallablePolicy
from expcli.errors import ConfigError
from tests.collect.structured_envs import ARM, PHASE, TEXT, registry_kept

MODULE = "tests.collect.structured_envs"


class Recorder:
    """A policy replaying ``actions(t)`` and keeping every batch of observations it saw."""

    def __init__(self, actions: Any) -> None:
        self.actions = actions
        self.seen: list[Any] = []

    def __call__(self, obs: Any) -> Any:
        self.seen.append(obs)
        return self.actions(len(self.seen) - 1)


def by_hand(env_id: str, n: int, seed: int, actions: list[list[Any]]) -> dict[str, list[Any]]:
    """Step ``n`` envs one by one with ``actions[t][i]``, resetting each as it ends."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        envs = [gym.make(env_id) for _ in range(n)]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    out: dict[str, list[Any]] = {k: [] for k in ("obs", "next", "rew", "term", "trunc")}
    for row in actions:
        values: dict[str, list[Any]] = {k: [] for k in out}
        for i, env in enumerate(envs):
            nxt, reward, term, trunc, _ = env.step(row[i])
            for key, value in zip(out, (obs[i], nxt, reward, term, trunc), strict=True):
                values[key].append(value)
            obs[i] = env.reset()[0] if term or trunc else nxt
        for key in out:
            out[key].append(values[key])
    for env in envs:
        env.close()
    return out


def stored(memory: RandomMemory) -> dict[str, np.ndarray]:
    return {name: memory.get_tensor_by_name(name).numpy().copy() for name in memory.tensors}


def leaf(samples: list[list[Any]], *path: Any) -> np.ndarray:
    """``samples[t][i]`` followed down ``path``, stacked to ``(T, N, ...)``."""

    def down(sample: Any) -> Any:
        for key in path:
            sample = sample[key]
        return sample

    return np.asarray([[down(s) for s in row] for row in samples])


@pytest.mark.parametrize("mode", ["dummy", "subproc"])
def test_dict_leaves_equal_the_env_stepped_by_hand(mode: str) -> None:
    n, steps, seed = 3, 24, 11
    table = np.random.default_rng(0).integers(0, 3, size=(steps, n))
    expected = by_hand(PHASE, n, seed, table.tolist())
    policy = Recorder(lambda t: table[t])
    memory = RandomMemory(steps, n, device="cpu")
    with ParallelEnv.from_id(f"{MODULE}:{PHASE}", n, para_mode=mode, asynchronous="restart") as env:
        Collector(env, memory, policy, seed=seed).collect(steps=steps * n)
    got = stored(memory)
    assert "observations" not in got and "next_observations" not in got
    for prefix, samples in (
        ("observations", expected["obs"]),
        ("next_observations", expected["next"]),
    ):
        pos, phase = got[f"{prefix}/pos"], got[f"{prefix}/phase"]
        assert pos.dtype == np.float32 and pos.shape == (steps, n, 2)
        assert phase.dtype == np.int64 and phase.shape == (steps, n, 1)
        np.testing.assert_array_equal(pos, leaf(samples, "pos"))
        np.testing.assert_array_equal(phase[..., 0], leaf(samples, "phase"))
    np.testing.assert_array_equal(got["actions"][..., 0], table)
    np.testing.assert_array_equal(got["rewards"][..., 0], np.float32(expected["rew"]))
    np.testing.assert_array_equal(got["terminated"][..., 0], expected["term"])
    np.testing.assert_array_equal(got["truncated"][..., 0], expected["trunc"])
    assert np.asarray(expected["term"]).any() and np.asarray(expected["trunc"]).any()
    # The policy saw a dict of batched arrays, as gymnasium batches them.
    first = policy.seen[0]
    assert isinstance(first, dict) and set(first) == {"pos", "phase"}
    assert first["pos"].shape == (n, 2) and first["pos"].dtype == np.float32
    assert first["phase"].shape == (n,) and first["phase"].dtype == np.int64
    for t in (0, 5, steps - 1):
        np.testing.assert_array_equal(policy.seen[t]["pos"], got["observations/pos"][t])
    # The structure comes back from the memory and from the saved dataset.
    nested = memory.structured("observations")
    assert set(nested) == {"pos", "phase"} and nested["pos"].shape == (steps, n, 2)
    assert memory.metadata["observation_space"]["type"] == "Dict"


def test_tuple_leaves_of_blackjack_equal_the_env_stepped_by_hand() -> None:
    n, steps, seed = 2, 40, 3
    table = np.random.default_rng(1).integers(0, 2, size=(steps, n))
    expected = by_hand("Blackjack-v1", n, seed, table.tolist())
    policy = Recorder(lambda t: table[t])
    memory = RandomMemory(steps, n, device="cpu")
    with ParallelEnv.from_id("Blackjack-v1", n, asynchronous="restart") as env:
        Collector(env, memory, policy, seed=seed).collect(steps=steps * n)
    got = stored(memory)
    for prefix, samples in (
        ("observations", expected["obs"]),
        ("next_observations", expected["next"]),
    ):
        for i in range(3):
            values = got[f"{prefix}/{i}"]
            assert values.dtype == np.int64 and values.shape == (steps, n, 1)
            np.testing.assert_array_equal(values[..., 0], leaf(samples, i))
    assert isinstance(policy.seen[0], tuple) and len(policy.seen[0]) == 3
    assert all(part.shape == (n,) and part.dtype == np.int64 for part in policy.seen[0])
    nested = memory.to_dataset().structured("next_observations")
    assert isinstance(nested, tuple) and [part.shape for part in nested] == [(steps, n, 1)] * 3


def test_same_step_vector_env_stores_the_same_leaves_as_parallel_env() -> None:
    """A gymnasium vector env hands batched dicts (final observations in infos)."""
    from gymnasium.vector import AutoresetMode

    n, steps, seed = 2, 20, 5
    table = np.random.default_rng(2).integers(0, 3, size=(steps, n))
    memories = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vector = gym.make_vec(
            PHASE,
            n,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        )
    for env in (vector, ParallelEnv.from_id(f"{MODULE}:{PHASE}", n, asynchronous="restart")):
        memory = RandomMemory(steps, n, device="cpu")
        try:
            Collector(env, memory, Recorder(lambda t: table[t]), seed=seed).collect(steps=steps * n)
        finally:
            env.close()
        memories.append(stored(memory))
    assert memories[0].keys() == memories[1].keys()
    assert (memories[0]["terminated"] | memories[0]["truncated"]).any()
    for name in memories[0]:
        np.testing.assert_array_equal(memories[0][name], memories[1][name], err_msg=name)


def test_dict_actions_from_a_policy_reach_the_envs() -> None:
    n, steps, seed = 3, 18, 2
    rng = np.random.default_rng(4)
    moves = rng.integers(0, 3, size=(steps, n)).astype(np.int32)  # cast to int64 on the way
    forces = rng.uniform(-1, 1, size=(steps, n, 2))  # float64, cast to the Box's float32

    def act(t: int) -> dict[str, np.ndarray]:
        return {"move": moves[t], "force": forces[t]}

    per_env = [
        [{"move": int(moves[t, i]), "force": forces[t, i].astype(np.float32)} for i in range(n)]
        for t in range(steps)
    ]
    expected = by_hand(ARM, n, seed, per_env)
    memory = RandomMemory(steps, n, device="cpu")
    with ParallelEnv.from_id(f"{MODULE}:{ARM}", n, asynchronous="restart") as env:
        policy = CallablePolicy(Recorder(act), {"spec": "test"}, env.action_space, n)
        Collector(env, memory, policy, seed=seed).collect(steps=steps * n)
    got = stored(memory)
    assert got["actions/move"].dtype == np.int64 and got["actions/move"].shape == (steps, n, 1)
    assert got["actions/force"].dtype == np.float32 and got["actions/force"].shape == (steps, n, 2)
    np.testing.assert_array_equal(got["actions/move"][..., 0], moves)
    np.testing.assert_array_equal(got["actions/force"], forces.astype(np.float32))
    np.testing.assert_array_equal(got["observations/0"], leaf(expected["obs"], 0))
    np.testing.assert_array_equal(got["next_observations/1"][..., 0], leaf(expected["next"], 1))
    np.testing.assert_array_equal(got["rewards"][..., 0], np.float32(expected["rew"]))


def test_random_policy_on_dict_actions_is_stored_leaf_by_leaf() -> None:
    from tests.collect.test_policies import PerEnvReference

    n, steps = 4, 10
    memory = RandomMemory(steps, n, device="cpu")
    with ParallelEnv.from_id(f"{MODULE}:{ARM}", n, asynchronous="restart") as env:
        reference = PerEnvReference(env.action_space, n, 9)
        Collector(env, memory, None, seed=9).collect(steps=steps * n)
    got = stored(memory)
    for t in range(steps):
        sample = reference.sample()
        np.testing.assert_array_equal(got["actions/move"][t, :, 0], sample["move"])
        np.testing.assert_array_equal(got["actions/force"][t], sample["force"])


@pytest.mark.parametrize(
    ("actions", "message"),
    [
        ({"move": np.zeros(2, int)}, "keys ['move']; expected ['force', 'move']"),
        (
            {"move": np.zeros(2, int), "force": np.full((2, 2), 3.0)},
            "policy 'mine' (actions/force) returned 3.0 for env 0",
        ),
        ({"move": np.full(2, 7), "force": np.zeros((2, 2))}, "(actions/move) returned action 7"),
        ([{"move": 0}, {"move": 1}], "not in Dict"),
    ],
)
def test_dict_actions_that_do_not_fit_are_refused(actions: Any, message: str) -> None:
    space = gym.make(ARM).action_space
    with pytest.raises(ConfigError) as info:
        check_actions(actions, space, 2, "mine")
    assert message in str(info.value)


def test_text_leaves_are_code_points_that_read_back_as_strings() -> None:
    n, steps, seed = 2, 12, 0
    table = np.ones((steps, n), dtype=np.int64)
    expected = by_hand(TEXT, n, seed, table.tolist())
    policy = Recorder(lambda t: table[t])
    memory = RandomMemory(steps, n, device="cpu")
    with ParallelEnv.from_id(f"{MODULE}:{TEXT}", n, asynchronous="restart") as env:
        Collector(env, memory, policy, seed=seed).collect(steps=steps * n)
    got = stored(memory)
    codes = got["next_observations/word"]
    assert codes.dtype == np.int32 and codes.shape == (steps, n, 5)
    words = leaf(expected["next"], "word")
    padded = [[[ord(c) for c in w] + [0] * (5 - len(w)) for w in row] for row in words]
    np.testing.assert_array_equal(codes, padded)
    nested = memory.to_dataset().structured("next_observations")
    np.testing.assert_array_equal(nested["word"], words)
    assert any("é" in w for w in words.ravel())
    assert policy.seen[0]["word"].tolist() == ["a", "a"]


def test_a_leaf_expcli_cannot_store_is_refused_without_sampling_it() -> None:
    """MiniGrid's MissionSpace cannot be sampled; the refusal names the leaf and the fix."""
    env_id = "minigrid:MiniGrid-Empty-5x5-v0"
    with registry_kept(), ParallelEnv.from_id(env_id, 2) as env:
        with pytest.raises(ConfigError) as info:
            Collector(env, RandomMemory(8, 2, device="cpu"))
    message = str(info.value)
    assert "observations/mission is a MissionSpace space" in message
    assert "--wrapper minigrid.wrappers:ImgObsWrapper" in message and "\n" not in message
    memory = RandomMemory(8, 2, device="cpu")
    wrappers = ["minigrid.wrappers:ImgObsWrapper"]
    with registry_kept(), ParallelEnv.from_id(env_id, 2, wrappers=wrappers) as env:
        Collector(env, memory, seed=0).collect(steps=16)
    image = memory.get_tensor_by_name("observations").numpy()
    assert image.dtype == np.uint8 and image.shape == (8, 2, 7, 7, 3) and image.any()


def test_rewards_are_float32_unless_asked_and_the_narrowing_is_recorded() -> None:
    n, steps, seed = 2, 16, 1
    table = np.random.default_rng(3).integers(0, 3, size=(steps, n))
    expected = np.asarray(by_hand(PHASE, n, seed, table.tolist())["rew"])
    for dtype in ("float32", "float64"):
        memory = RandomMemory(steps, n, device="cpu")
        with ParallelEnv.from_id(f"{MODULE}:{PHASE}", n, asynchronous="restart") as env:
            collector = Collector(
                env, memory, Recorder(lambda t: table[t]), seed=seed, rewards_dtype=dtype
            )
            collector.collect(steps=steps * n)
        rewards = stored(memory)["rewards"][..., 0]
        note = memory.metadata["rewards"]
        assert rewards.dtype == np.dtype(dtype) and note["dtype"] == dtype
        assert note["env_dtype"] == "float64"
        np.testing.assert_array_equal(rewards, expected.astype(dtype))
        changed = int((expected.astype(dtype) != expected).sum())
        assert note["narrowed"] == (dtype == "float32") and note["values_changed"] == changed
        assert (changed > 0) == (dtype == "float32")
    with pytest.raises(ConfigError, match="rewards_dtype must be float32 or float64"):
        with ParallelEnv.from_id(f"{MODULE}:{PHASE}", 1) as env:
            Collector(env, RandomMemory(4, 1, device="cpu"), rewards_dtype=np.int64)
