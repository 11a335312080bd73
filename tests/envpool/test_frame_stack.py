"""Atari through EnvPool: one frame stored per observation, stacked at sample time exactly as
EnvPool stacks them (the episode's first frame repeated at its start)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from typer.testing import CliRunner

from expcli import load
from expcli.cli.app import app
from expcli.memory.episodes import EpisodeIndex
from expcli.replay import ReplayBuffer

LIMIT = 25  # short episodes: several episode starts in a small run
SEED = 4
N = 2


def envpool_stacks(envpool: Any, actions: np.ndarray, counts: list[int]) -> list[list[Any]]:
    """Per env, ``(stack before, stack after)`` of each real step, EnvPool stepping by hand
    with ``stack_num=4`` and its own autoreset, fed each env's stored actions in order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pool = envpool.make(
            "Pong-v5", "gymnasium", num_envs=N, seed=SEED, max_episode_steps=LIMIT, stack_num=4
        )
        obs, _ = pool.reset()
    done = np.zeros(N, dtype=bool)
    out: list[list[Any]] = [[] for _ in range(N)]
    while any(len(out[i]) < counts[i] for i in range(N)):
        step = [actions[len(out[i]), i] if not done[i] and len(out[i]) < counts[i] else 0
                for i in range(N)]  # fmt: skip
        nxt, _, term, trunc, _ = pool.step(np.array(step))
        for i in range(N):
            if not done[i] and len(out[i]) < counts[i]:
                out[i].append((obs[i], nxt[i]))
        obs, done = nxt, term | trunc
    pool.close()
    return out


def test_stacks_at_sample_time_are_envpools_own(envpool: Any, tmp_path: Path) -> None:
    path = tmp_path / "pong.pt"
    result = CliRunner().invoke(
        app,
        ["collect", "Pong-v5", "--mode", "envpool", "--envs", str(N), "--steps", "160",
         "--seed", str(SEED), "--env-kwargs", json.dumps({"max_episode_steps": LIMIT}),
         "-q", "-o", str(path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = load(path)
    t = data.tensors
    assert t["observations"].shape[1:] == (N, 1, 84, 84)  # one frame, not four
    assert data.metadata["frame_stack"] == {"stack_num": 4, "stored": 1}
    assert data.metadata["collector"]["envpool"]["config"]["stack_num"] == 1
    rows = len(t["rewards"])
    starts = int((t["terminated"] | t["truncated"]).sum())
    assert starts >= 4  # episode starts inside the run, besides the first
    expected = envpool_stacks(envpool, t["actions"][:, :, 0], [rows] * N)
    book = EpisodeIndex(data)
    index = np.arange(rows * N)
    stacked = {
        name: book.get(index, name, stack_num=4).reshape(rows, N, 4, 84, 84)
        for name in ("observations", "next_observations")
    }
    for k in range(rows):
        for i in range(N):
            before, after = expected[i][k]
            assert np.array_equal(stacked["observations"][k, i], before), (k, i)
            assert np.array_equal(stacked["next_observations"][k, i], after), (k, i)
    buffer = ReplayBuffer(data, batch_size=16, seed=0, stack_num=4)
    batch, info = buffer.sample(return_info=True)
    flat = {name: stacked[name].reshape(rows * N, 4, 1, 84, 84) for name in stacked}
    for name in flat:
        assert np.array_equal(batch[name].numpy(), flat[name][info["index"]])
