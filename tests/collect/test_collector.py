"""Collector against Gymnasium stepped by hand: same transitions, no bogus rows, in every mode."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from expcli import ParallelEnv, RandomMemory
from expcli.collect import Collector
from expcli.errors import ConfigError, EnvError
from tests.collect.registered_envs import COUNTING, CRASHING

ENV_ID = "CartPole-v1"


class Scripted:
    """A policy replaying a fixed table of actions, one row per call."""

    def __init__(self, actions: np.ndarray) -> None:
        self.actions = actions
        self.calls = 0

    def __call__(self, obs: Any) -> np.ndarray:
        row = self.actions[self.calls]
        self.calls += 1
        return row


def _by_hand(env_id: str, n: int, seed: int, actions: np.ndarray) -> dict[str, np.ndarray]:
    """Step ``n`` Gymnasium envs one by one, resetting each as its episode ends."""
    out: dict[str, list[list[Any]]] = {k: [] for k in ("obs", "next", "rew", "term", "trunc")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        envs = [gym.make(env_id) for _ in range(n)]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    for t in range(len(actions)):
        rows: dict[str, list[Any]] = {k: [] for k in out}
        for i, env in enumerate(envs):
            nxt, r, te, tr, _ = env.step(actions[t, i])
            rows["obs"].append(obs[i])
            rows["next"].append(nxt)
            rows["rew"].append(r)
            rows["term"].append(te)
            rows["trunc"].append(tr)
            obs[i] = env.reset()[0] if te or tr else nxt
        for k in out:
            out[k].append(rows[k])
    for env in envs:
        env.close()
    return {k: np.asarray(v) for k, v in out.items()}


def _tensors(memory: RandomMemory) -> dict[str, np.ndarray]:
    return {name: memory.get_tensor_by_name(name).numpy().copy() for name in memory.tensors}


@pytest.mark.parametrize("mode", ["dummy", "subproc"])
def test_restart_mode_matches_gymnasium_by_hand(mode: str) -> None:
    n, steps = 4, 120
    actions = np.random.default_rng(1).integers(0, 2, size=(steps, n))
    expected = _by_hand(ENV_ID, n, 7, actions)
    memory = RandomMemory(steps, n, device="cpu")
    with ParallelEnv.from_id(ENV_ID, n, para_mode=mode, asynchronous="restart") as env:
        stats = Collector(env, memory, Scripted(actions), seed=7).collect(steps=steps * n)
    got = _tensors(memory)
    assert stats.steps == steps * n and memory.filled
    np.testing.assert_array_equal(got["observations"], expected["obs"].astype(np.float32))
    np.testing.assert_array_equal(got["next_observations"], expected["next"].astype(np.float32))
    np.testing.assert_array_equal(got["actions"][..., 0], actions)
    np.testing.assert_array_equal(got["rewards"][..., 0], expected["rew"])
    np.testing.assert_array_equal(got["terminated"][..., 0], expected["term"])
    np.testing.assert_array_equal(got["truncated"][..., 0], expected["trunc"])
    done = expected["term"] | expected["trunc"]
    assert stats.episodes.complete == int(done.sum()) > 0


def _check_cartpole_rows(memory: RandomMemory) -> None:
    """No bogus rows: every reward is 1, and inside an episode next_obs[t] == obs[t+1]."""
    t = _tensors(memory)
    rows = memory.memory_index if not memory.filled else memory.memory_size
    assert (t["rewards"][:rows] == 1.0).all(), "a reward-0 row: an autoreset step stored as data"
    done = (t["terminated"] | t["truncated"])[:rows, :, 0]
    inside = ~done[:-1]
    np.testing.assert_array_equal(
        t["next_observations"][: rows - 1][inside], t["observations"][1:rows][inside]
    )
    # After an episode ends, the next row starts from a reset: CartPole resets within ±0.05.
    starts = np.abs(t["observations"][1:rows][done[:-1]])
    assert (starts <= 0.05).all()


def test_vector_mode_stores_no_autoreset_rows() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make_vec(ENV_ID, num_envs=8, vectorization_mode="vector_entry_point")
    memory = RandomMemory(300, 8, device="cpu")
    collector = Collector(env, memory, seed=3)
    stats = collector.collect(steps=2400)
    collector.close()
    assert stats.steps == 2400 and stats.env_steps > 2400  # resets took steps
    _check_cartpole_rows(memory)
    t = _tensors(memory)
    done = t["terminated"] | t["truncated"]
    assert stats.episodes.complete == int(done.sum())
    # Every complete episode's return equals its length (reward 1 per step).
    assert stats.episodes.returns == stats.episodes.lengths


@pytest.mark.parametrize("asynchronous", [None, "idle", "restart"])
def test_async_modes_store_consistent_rows(asynchronous: str | None) -> None:
    memory = RandomMemory(200, 4, device="cpu")
    with ParallelEnv.from_id(ENV_ID, 4, asynchronous=asynchronous) as env:
        collector = Collector(env, memory, seed=0)
        stats = collector.collect(steps=800)
    assert stats.steps == 800
    _check_cartpole_rows(memory)
    t = _tensors(memory)
    if asynchronous is None:
        # Each time one env ends, the others' episodes are cut: truncated, not terminated.
        terminated_rows = t["terminated"][..., 0].any(axis=1)
        assert (t["truncated"][..., 0] | t["terminated"][..., 0])[terminated_rows].all()


def test_episodes_target_grows_the_memory() -> None:
    memory = RandomMemory(4, 2, device="cpu")
    with ParallelEnv.from_id(ENV_ID, 2, asynchronous="restart") as env:
        stats = Collector(env, memory, seed=0, grow=True).collect(episodes=10)
    assert stats.episodes.complete >= 10
    assert not memory.filled and memory.memory_size > 4
    done = (_tensors(memory)["terminated"] | _tensors(memory)["truncated"])[: memory.memory_index]
    assert int(done.sum()) == stats.episodes.complete
    _check_cartpole_rows(memory)


def test_same_seed_same_tensors_in_each_mode() -> None:
    def run(mode: str) -> dict[str, np.ndarray]:
        memory = RandomMemory(50, 3, device="cpu")
        if mode == "vector":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                env: Any = gym.make_vec(ENV_ID, 3, vectorization_mode="vector_entry_point")
        else:
            env = ParallelEnv.from_id(ENV_ID, 3, para_mode=mode, asynchronous="restart")
        try:
            Collector(env, memory, seed=11).collect(steps=150)
        finally:
            env.close()
        return _tensors(memory)

    for mode in ("dummy", "subproc", "vector"):
        a, b = run(mode), run(mode)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=f"{mode}: {name}")
    dummy, subproc = run("dummy"), run("subproc")
    for name in dummy:
        np.testing.assert_array_equal(dummy[name], subproc[name])


def test_infos_become_tensors() -> None:
    memory = RandomMemory(20, 2, device="cpu")
    with ParallelEnv.from_id(COUNTING, 2, asynchronous="restart") as env:
        Collector(env, memory, seed=0, infos=True).collect(steps=40)
    t = memory.get_tensor_by_name("infos/t").numpy()[..., 0]
    steps = memory.get_tensor_by_name("observations").numpy()[..., 0] + 1  # obs[0] is t
    # CountingEnv reports {"t": t} on even steps only; other rows are NaN.
    even = steps % 2 == 0
    np.testing.assert_array_equal(t[even], steps[even])
    assert np.isnan(t[~even]).all()


def test_env_error_keeps_what_was_stored() -> None:
    memory = RandomMemory(100, 2, device="cpu")
    with ParallelEnv.from_id(CRASHING, 2, asynchronous="restart") as env:
        collector = Collector(env, memory, seed=0)
        with pytest.raises(EnvError, match="boom"):
            collector.collect(steps=200)
    assert memory.memory_index == 39  # the 40th step of each env raised


def test_stop_ends_after_the_current_step() -> None:
    memory = RandomMemory(1000, 2, device="cpu")
    with ParallelEnv.from_id(ENV_ID, 2) as env:
        collector = Collector(env, memory, seed=0)

        def progress(p: Any) -> None:
            if p.steps >= 20:
                collector.stop()

        stats = collector.collect(steps=2000, progress=progress, progress_interval=0.0)
    assert stats.interrupted and 20 <= stats.steps < 2000
    assert stats.steps == len(memory)


def test_bad_targets_and_sizes() -> None:
    with ParallelEnv.from_id(ENV_ID, 2) as env:
        with pytest.raises(ConfigError, match="columns"):
            Collector(env, RandomMemory(10, 3, device="cpu"))
        collector = Collector(env, RandomMemory(10, 2, device="cpu"))
        with pytest.raises(ConfigError, match="exactly one"):
            collector.collect()
        with pytest.raises(ConfigError, match="positive"):
            collector.collect(steps=0)


@pytest.mark.parametrize("mode", ["dummy", "vector"])  # one row per step; staged blocks
def test_the_memory_wraps_counts_laps_and_exports(mode: str, tmp_path: Any) -> None:
    from expcli import load
    from expcli.replay.storages import MemoryStorage

    def make_env() -> Any:
        if mode == "vector":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return gym.make_vec(ENV_ID, 4, vectorization_mode="vector_entry_point")
        return ParallelEnv.from_id(ENV_ID, 4, asynchronous="restart")

    whole = RandomMemory(250, 4, device="cpu")  # the same run, never wrapped
    env = make_env()
    try:
        Collector(env, whole, seed=3).collect(steps=1000)
    finally:
        env.close()
    reference = _tensors(whole)
    memory = RandomMemory(100, 4, device="cpu", export=True, export_directory=str(tmp_path))
    storage = MemoryStorage(memory)
    seen = storage.revision()
    env = make_env()
    try:
        collector = Collector(env, memory, seed=3)
        collector.collect(steps=1000)
        assert memory.revision[1] == 2 and memory.filled and memory.memory_index == 50
        written = storage.written_since(seen)
        assert written is None or set(written.tolist()) == set(range(400))
        got = _tensors(memory)
        seen = storage.revision()
        collector.collect(steps=400)  # one whole lap more
        written = storage.written_since(seen)
        assert written is None or set(written.tolist()) == set(range(400))
    finally:
        env.close()
    exports = sorted((tmp_path / "memories").glob("*.pt"))
    assert len(exports) == 3  # the third lap is the extra one
    for lap, path in enumerate(exports[:2]):
        saved = load(path)
        assert saved.state.filled and saved.state.memory_index == 0
        for name, array in reference.items():
            np.testing.assert_array_equal(
                np.asarray(saved.tensors[name]), array[lap * 100 : (lap + 1) * 100], name
            )
    for name, array in reference.items():
        np.testing.assert_array_equal(got[name][:50], array[200:250], name)
        np.testing.assert_array_equal(got[name][50:], array[150:200], name)
