"""``--check`` on Dict and Tuple data (leaf by leaf), on Blackjack, and on compact bounds.

Blackjack stepped by hand replays exactly, yet a new hand can be dealt exactly as the last
one ended: such rows are real steps, not autoreset rows. Gymnasium's next-step autoreset
recorded naively is flagged, row for row.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from expcli import ParallelEnv, RandomMemory, summarize
from expcli.collect import Collector
from expcli.collect.spaces import space_record
from expcli.formats import Dataset, write_dataset
from expcli.spec import CircularState
from expcli.summary import Finding, Summary
from expcli.summary.space_bounds import parse_space
from tests.collect.structured_envs import PHASE

BLACKJACK = gym.spaces.Tuple(
    (gym.spaces.Discrete(32), gym.spaces.Discrete(11), gym.spaces.Discrete(2))
)


def statuses(summary: Summary) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for finding in summary.checks or ():
        out.setdefault(finding.check, []).append(finding)
    return out


def blackjack_by_hand(steps: int, envs: int, seed: int) -> Dataset:
    """Blackjack stepped by hand, each env reset as soon as its hand ends (one leaf per part)."""
    env_list = [gym.make("Blackjack-v1") for _ in range(envs)]
    rng = np.random.default_rng(seed)
    obs = [e.reset(seed=seed + i)[0] for i, e in enumerate(env_list)]
    names = [f"{p}/{i}" for p in ("observations", "next_observations") for i in range(3)]
    tensors = {name: np.zeros((steps, envs, 1), np.int64) for name in names}
    tensors.update(
        actions=np.zeros((steps, envs, 1), np.int64),
        rewards=np.zeros((steps, envs, 1), np.float32),
        terminated=np.zeros((steps, envs, 1), bool),
        truncated=np.zeros((steps, envs, 1), bool),
    )
    for t in range(steps):
        for j, env in enumerate(env_list):
            action = int(rng.integers(2))
            nxt, reward, term, trunc, _ = env.step(action)
            for i in range(3):
                tensors[f"observations/{i}"][t, j] = obs[j][i]
                tensors[f"next_observations/{i}"][t, j] = nxt[i]
            tensors["actions"][t, j] = action
            tensors["rewards"][t, j] = reward
            tensors["terminated"][t, j], tensors["truncated"][t, j] = term, trunc
            obs[j] = env.reset()[0] if term or trunc else nxt
    metadata = {
        "observation_space": space_record(BLACKJACK),
        "action_space": space_record(gym.spaces.Discrete(2)),
    }
    return Dataset(tensors, CircularState(0, 0, True), metadata)


def starts_from_final(dataset: Dataset) -> int:
    """Rows right after an end whose observation equals that end's next observation."""
    t = dataset.tensors
    obs = np.concatenate([t[f"observations/{i}"] for i in range(3)], axis=2)
    nxt = np.concatenate([t[f"next_observations/{i}"] for i in range(3)], axis=2)
    done = (t["terminated"] | t["truncated"])[..., 0]
    return int((done[:-1] & (obs[1:] == nxt[:-1]).all(axis=2)).sum())


def as_one_tensor(dataset: Dataset) -> Dataset:
    """The same data with each observation's three parts in one ``(3,)`` tensor."""
    tensors = {k: v for k, v in dataset.tensors.items() if "observations/" not in k}
    for prefix in ("observations", "next_observations"):
        parts = [dataset.tensors[f"{prefix}/{i}"] for i in range(3)]
        tensors[prefix] = np.concatenate(parts, axis=2)
    return Dataset(tensors, dataset.state, {})


@pytest.mark.parametrize("leaves", [True, False], ids=["leaves", "one-tensor"])
def test_blackjack_that_replays_exactly_passes_the_autoreset_check(
    tmp_path: Path, leaves: bool
) -> None:
    dataset = blackjack_by_hand(steps=1500, envs=4, seed=0)
    assert starts_from_final(dataset) >= 10  # new hands dealt as the last ones ended
    dataset = dataset if leaves else as_one_tensor(dataset)
    summary = summarize(write_dataset(dataset, tmp_path / "bj.npz"), check=True)
    found = statuses(summary)
    assert found["autoreset"][0].status == "passed", found["autoreset"]
    assert found["continuity"][0].status == "passed"
    assert not summary.failed, summary.checks


def test_naive_next_step_autoreset_of_blackjack_is_flagged_row_by_row(tmp_path: Path) -> None:
    """Gymnasium's vector env spends the step after an end on the reset (reward 0, no
    flags, the observation the final one); recorded as transitions, every one is flagged."""
    envs, steps = 3, 300
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vector = gym.make_vec("Blackjack-v1", envs, vectorization_mode="sync")
    obs, _ = vector.reset(seed=0)
    names = [f"{p}/{i}" for p in ("observations", "next_observations") for i in range(3)]
    tensors = {name: np.zeros((steps, envs, 1), np.int64) for name in names}
    for name, dtype in (("actions", np.int64), ("rewards", np.float32)):
        tensors[name] = np.zeros((steps, envs, 1), dtype)
    tensors["terminated"] = np.zeros((steps, envs, 1), bool)
    tensors["truncated"] = np.zeros((steps, envs, 1), bool)
    rng = np.random.default_rng(1)
    autoresets = np.zeros((steps, envs), bool)
    ended = np.zeros(envs, bool)
    for t in range(steps):
        action = rng.integers(0, 2, envs)
        nxt, reward, term, trunc, _ = vector.step(action)
        for i in range(3):
            tensors[f"observations/{i}"][t, :, 0] = obs[i]
            tensors[f"next_observations/{i}"][t, :, 0] = nxt[i]
        tensors["actions"][t, :, 0], tensors["rewards"][t, :, 0] = action, reward
        tensors["terminated"][t, :, 0], tensors["truncated"][t, :, 0] = term, trunc
        autoresets[t] = ended
        ended = term | trunc
        obs = nxt
    vector.close()
    metadata = {"observation_space": space_record(BLACKJACK)}
    dataset = Dataset(tensors, CircularState(0, 0, True), metadata)
    summary = summarize(write_dataset(dataset, tmp_path / "naive.h5"), check=True)
    finding = statuses(summary)["autoreset"][0]
    assert finding.failed and finding.count == int(autoresets.sum()) > 50
    assert list(finding.rows) == [tuple(p) for p in np.argwhere(autoresets)[: len(finding.rows)]]


def phase_dataset(steps: int = 40, envs: int = 2) -> Dataset:
    memory = RandomMemory(steps, envs, device="cpu")
    with ParallelEnv.from_id(
        f"tests.collect.structured_envs:{PHASE}", envs, asynchronous="restart"
    ) as env:
        Collector(env, memory, seed=4).collect(steps=steps * envs)
    return memory.to_dataset()


def test_collected_dict_data_passes_and_a_synthetic_autoreset_row_fails(tmp_path: Path) -> None:
    dataset = phase_dataset()
    summary = summarize(write_dataset(dataset, tmp_path / "ok.npz"), check=True)
    assert not summary.failed, summary.checks
    names = {f.message.split("'")[1] for f in statuses(summary)["observation_space"]}
    assert {"observations/pos", "observations/phase", "next_observations/pos"} <= names
    t = dataset.tensors
    done = (t["terminated"] | t["truncated"])[:, 0, 0]
    end = int(np.flatnonzero(done[:-2])[0])
    for leaf in ("pos", "phase"):  # the row after the end starts from the final observation
        t[f"observations/{leaf}"][end + 1, 0] = t[f"next_observations/{leaf}"][end, 0]
        t[f"next_observations/{leaf}"][end + 1, 0] = t[f"observations/{leaf}"][end + 2, 0]
    t["rewards"][end + 1, 0] = 0
    t["terminated"][end + 1, 0] = t["truncated"][end + 1, 0] = False
    summary = summarize(write_dataset(dataset, tmp_path / "reset.npz"), check=True)
    finding = statuses(summary)["autoreset"][0]
    assert finding.failed and finding.rows == ((end + 1, 0),)
    assert statuses(summary)["continuity"][0].status == "passed"


def test_space_checks_go_leaf_by_leaf(tmp_path: Path) -> None:
    dataset = phase_dataset()
    dataset.tensors["observations/phase"][3, 1, 0] = 0  # Discrete(4, start=1): 1..4
    dataset.tensors["next_observations/pos"][5, 0, 1] = 11.0  # Box(-10, 10)
    summary = summarize(write_dataset(dataset, tmp_path / "bad.h5"), check=True)
    failed = {f.message: f.rows for f in statuses(summary)["observation_space"] if f.failed}
    assert failed == {
        "'observations/phase' outside Discrete(4, start=1)": ((3, 1),),
        "'next_observations/pos' outside Box(low=-10, high=10, shape=(2,), dtype=float32)": (
            (5, 0),
        ),
    }


def test_metadata_check_names_the_leaf_that_disagrees(tmp_path: Path) -> None:
    dataset = phase_dataset(steps=6)
    tensors = dict(dataset.tensors)
    tensors["observations/pos"] = tensors["observations/pos"].astype(np.float64)
    del tensors["next_observations/phase"], tensors["observations/phase"]
    bad = Dataset(tensors, dataset.state, dataset.metadata)
    summary = summarize(write_dataset(bad, tmp_path / "meta.npz"), check=True)
    [finding] = statuses(summary)["metadata"]
    assert finding.failed
    pos = "Box(low=-10, high=10, shape=(2,), dtype=float32)"
    assert f"observation_space has observations/pos as {pos} but " in finding.message
    assert "the leaf 'observations/phase', missing from the data" in finding.message


def test_uniform_bounds_are_stored_once_and_read_everywhere(tmp_path: Path) -> None:
    image = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    description = space_record(image)
    assert description["low"] == 0 and description["high"] == 255
    assert len(json.dumps(description)) < 120
    bounds = parse_space(description)
    assert bounds is not None and bounds.shape == (210, 160, 3)
    assert np.broadcast_shapes(bounds.low.shape, bounds.shape) == bounds.shape  # never expanded
    assert (bounds.low == 0).all() and (bounds.high == 255).all()
    mixed = gym.spaces.Box(np.float32([-1, -np.inf]), np.float32([1, np.inf]))
    described = space_record(mixed)
    assert described["low"] == [-1.0, "-inf"] and described["high"] == [1.0, "inf"]
    assert space_record(gym.spaces.Box(-np.inf, np.inf, (4,)))["low"] == "-inf"
    full = {**description, "low": np.zeros((210, 160, 3)).tolist()}  # the old form
    full_bounds = parse_space(full)
    assert full_bounds is not None
    assert np.array_equal(*np.broadcast_arrays(full_bounds.low, bounds.low))
    from expcli.summary.space_bounds import space_text

    text = space_text(space_record(gym.make(PHASE).observation_space))
    pos = "Box(low=-10, high=10, shape=(2,), dtype=float32)"
    assert text == f"Dict(phase: Discrete(4, start=1), pos: {pos})"
    frames = np.zeros((4, 1, 210, 160, 3), np.uint8)
    frames[1, 0, 0, 0, 0] = 7
    tensors = {"observations": frames, "rewards": np.zeros((4, 1, 1), np.float32)}
    dataset = Dataset(tensors, CircularState(0, 0, True), {"observation_space": description})
    summary = summarize(write_dataset(dataset, tmp_path / "img.npz"), check=True)
    assert statuses(summary)["observation_space"][0].status == "passed"


def render(description: Any) -> str:
    from expcli.cli._inspect_render import _space

    return _space(description)


def test_inspect_shows_the_structure() -> None:
    assert render(space_record(BLACKJACK)) == "Tuple(Discrete(32), Discrete(11), Discrete(2))"
