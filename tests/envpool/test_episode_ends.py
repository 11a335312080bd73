"""EnvPool's episode ends stored right, against EnvPool stepped by hand; seeds reproduce bytes.

EnvPool resets an ended env on its next step, ignoring that step's action (envpool#194).
The stored rows must be exactly the real transitions of that stream: the final observation
in ``next_observations`` at an episode's end, the reset step never stored, the next row
starting from the reset observation. The by-hand loops below are plain EnvPool usage, one
per ``--async`` mode that applies.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import Collector, RandomMemory, load
from expcli.cli.app import app
from expcli.errors import ConfigError
from tests.envpool.policies import cartpole

LIMIT = 15
SEED = 7
N = 3


def collect(tmp_path: Path, name: str, *args: str) -> Any:
    path = tmp_path / name
    result = CliRunner().invoke(app, ["collect", "-q", "-o", str(path), *args])
    assert result.exit_code == 0, result.output
    return load(path)


def by_hand(envpool: Any, asynchronous: str, per_env: int) -> list[list[tuple[Any, ...]]]:
    """Each env's first ``per_env`` real transitions, EnvPool stepped by hand."""
    with warnings.catch_warnings():  # EnvPool's float64 Box bounds, cast to float32
        warnings.simplefilter("ignore")
        pool = envpool.make(
            "CartPole-v1", "gymnasium", num_envs=N, seed=SEED, max_episode_steps=LIMIT
        )
        obs, _ = pool.reset()
    columns: list[list[tuple[Any, ...]]] = [[] for _ in range(N)]
    ended = np.zeros(N, dtype=bool)  # restart: the env's next step is EnvPool's reset
    live = np.ones(N, dtype=bool)  # idle: envs still running
    while min(len(c) for c in columns) < per_env:
        if asynchronous == "idle":
            ids = np.flatnonzero(live).astype(np.int32)
            nxt, rew, term, trunc, _ = pool.step(cartpole(obs[ids]), ids)
        else:
            ids = np.arange(N, dtype=np.int32)
            nxt, rew, term, trunc, _ = pool.step(cartpole(obs))
        done = term | trunc
        for k, i in enumerate(ids):
            if asynchronous == "restart" and ended[i]:
                continue  # EnvPool's reset step: not a transition
            cut = asynchronous == "none" and done.any() and not done[k]
            row = (obs[i], cartpole(obs[i : i + 1])[0], rew[k], nxt[k], term[k], trunc[k] or cut)
            columns[i].append(row)
        obs = obs.copy()
        obs[ids] = nxt
        if asynchronous == "restart":
            ended = done
        elif asynchronous == "none" and done.any():
            obs, _ = pool.reset()
        elif asynchronous == "idle":
            live[ids[done]] = False
            if not live.any():
                obs, _ = pool.reset()
                live[:] = True
    pool.close()
    return columns


def assert_rows_are(t: Any, expected: list[list[tuple[Any, ...]]], label: str) -> None:
    """Row ``k`` of env column ``i`` is env ``i``'s ``k``-th real transition."""
    for i in range(N):
        for k, (o, a, r, nxt, term, trunc) in enumerate(expected[i][: len(t["rewards"])]):
            assert t["observations"][k, i].tobytes() == o.tobytes(), (label, i, k)
            assert t["actions"][k, i, 0] == a
            assert t["rewards"][k, i, 0] == r
            assert t["next_observations"][k, i].tobytes() == nxt.tobytes(), (label, i, k)
            assert (t["terminated"][k, i, 0], t["truncated"][k, i, 0]) == (term, trunc)


@pytest.mark.parametrize("asynchronous", ["restart", "none", "idle"])
def test_rows_are_envpools_real_transitions(
    envpool: Any, tmp_path: Path, asynchronous: str
) -> None:
    data = collect(
        tmp_path,
        "run.npz",
        "CartPole-v1",
        "--mode", "envpool",
        "--envs", str(N),
        "--steps", str(N * 60),
        "--seed", str(SEED),
        "--async", asynchronous,
        "--policy", "tests.envpool.policies:cartpole",
        "--env-kwargs", json.dumps({"max_episode_steps": LIMIT}),
    )  # fmt: skip
    t = data.tensors
    rows = len(t["rewards"])
    assert_rows_are(t, by_hand(envpool, asynchronous, rows), asynchronous)
    ended = t["terminated"] | t["truncated"]
    assert t["terminated"].sum() >= 2 and t["truncated"].sum() >= 2
    # After an end the next row starts afresh: never from the final observation.
    after = np.argwhere(ended[:-1, :, 0])
    for k, i in after:
        assert not np.array_equal(t["observations"][k + 1, i], t["next_observations"][k, i])
    if asynchronous != "idle":
        assert data.metadata["collector"]["env_steps"] == rows * N  # no step spent on resets
    envpool_meta = data.metadata["collector"]["envpool"]
    assert envpool_meta["seed"] == SEED and envpool_meta["time_limit"] == LIMIT
    assert envpool_meta["config"]["num_envs"] == N and envpool_meta["version"]


def test_collector_takes_a_pool_built_with_envpool_make(envpool: Any) -> None:
    """The ``envpool`` backend of ``Collector``: a pool from ``envpool.make`` (EnvPool's own
    time limit), stepped with the same rows as by hand; dm_env pools are refused."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pool = envpool.make(
            "CartPole-v1", "gymnasium", num_envs=N, seed=SEED, max_episode_steps=LIMIT
        )
    memory = RandomMemory(memory_size=60, num_envs=N, device="cpu")
    with pytest.raises(ConfigError, match="not built with seed 8"):
        Collector(pool, memory, policy=cartpole, seed=SEED + 1).collect(steps=N)
    collector = Collector(pool, memory, policy=cartpole, seed=SEED)
    stats = collector.collect(steps=N * 60)
    collector.close()
    assert stats.steps == stats.env_steps == N * 60 and stats.episodes.complete >= 4
    t = {name: memory.get_tensor_by_name(name).numpy() for name in memory.get_tensor_names()}
    assert_rows_are(t, by_hand(envpool, "restart", 60), "Collector")
    dm_pool = envpool.make("CartPole-v1", "dm", num_envs=N)
    with pytest.raises(ConfigError, match="build the pool with envpool.make"):
        Collector(dm_pool, RandomMemory(memory_size=4, num_envs=N, device="cpu"))
    dm_pool.close()


def test_the_same_seed_gives_the_same_bytes(envpool: Any, tmp_path: Path) -> None:
    args = ["CartPole-v1", "--mode", "envpool", "--envs", "4", "--steps", "400", "--seed", "3"]
    runs = [collect(tmp_path, f"{k}.npz", *args) for k in range(2)]
    other = collect(tmp_path, "other.npz", *args[:-1], "4")
    first, second = ({k: v.tobytes() for k, v in r.tensors.items()} for r in runs)
    assert first == second
    assert (
        first["observations"] != {k: v.tobytes() for k, v in other.tensors.items()}["observations"]
    )
    assert runs[0].metadata["collector"]["envpool"]["seed_drawn"] is False


def test_a_run_without_a_seed_records_the_one_drawn(envpool: Any, tmp_path: Path) -> None:
    data = collect(tmp_path, "x.npz", "CartPole-v1", "--mode", "envpool", "--steps", "10")
    meta = data.metadata["collector"]["envpool"]
    assert meta["seed_drawn"] is True and 0 <= meta["seed"] < 2**31
    assert meta["config"]["seed"] == meta["seed"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--async", "continue"], "--mode envpool takes --async restart, none or idle"),
        (["--seed", str(2**31)], "--seed must be from 0 to 2,147,483,647 with --mode envpool"),
        (["--env-kwargs", '{"num_envs": 2}'], "'num_envs' is set by --envs"),
        (["--env-kwargs", '{"bogus": 1}'], "--env-kwargs for envpool.make('CartPole-v1')"),
    ],
)
def test_what_envpool_cannot_take_is_refused_in_one_line(
    envpool: Any, tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(
        app, ["collect", "CartPole-v1", "--mode", "envpool", "-o", str(tmp_path / "x.npz"), *args]
    )
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert message in line
    assert not (tmp_path / "x.npz").exists()


def test_an_unknown_envpool_id_suggests_envpools_own(envpool: Any) -> None:
    result = CliRunner().invoke(app, ["collect", "ale_py:ALE/Pong-v5", "--mode", "envpool"])
    assert result.exit_code == 2
    assert "EnvPool has no env 'ale_py:ALE/Pong-v5'; did you mean Pong-v5" in result.stderr
