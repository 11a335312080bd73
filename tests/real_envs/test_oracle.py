"""The replay oracle itself: it replays envs stepped by hand and rejects any changed value.

Files here are recorded by ``by_hand.record`` (gymnasium stepped literally, saved with
expcli's ``save``), so a pass says the oracle's model of the decided behaviour agrees with
a plain reading of it, and each corruption must be reported at the row and env changed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from expcli import Dataset, load, save
from expcli.spec import CircularState
from tests.real_envs import by_hand
from tests.real_envs.needs import require
from tests.real_envs.oracle import CannotReplay, Mismatch, compare, replay

PUCK = "tests.real_envs.own_envs:ExpcliReal/Puck-v0"
PUCK_DICT_ACTIONS = "tests.real_envs.own_envs:ExpcliReal/PuckDictActions-v0"
MINIGRID = "minigrid:MiniGrid-Empty-5x5-v0"
DROP_MISSION = "tests.real_envs.own_envs:drop_mission"


@pytest.mark.parametrize(
    ("env_id", "needs", "options"),
    [
        ("CartPole-v1", (), {}),
        ("FrozenLake-v1", (), {}),
        ("Blackjack-v1", (), {}),
        (PUCK, (), {}),
        (PUCK_DICT_ACTIONS, (), {}),
        ("InvertedPendulum-v5", ("mujoco",), {}),
        ("LunarLander-v3", ("Box2D",), {"rows": 150}),
        (MINIGRID, ("minigrid",), {"wrappers": (DROP_MISSION,), "rows": 120}),
        (
            "ale_py:ALE/Pong-v5",
            ("ale_py",),
            {"num_envs": 2, "rows": 40, "env_kwargs": {"max_num_frames_per_episode": 60}},
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_replays_envs_stepped_by_hand(
    tmp_path: Path, env_id: str, needs: tuple[str, ...], options: dict[str, Any]
) -> None:
    require(needs)
    path = by_hand.record(env_id, tmp_path, **options)
    report = replay(path)
    assert report.mismatches == []
    num_envs, rows = options.get("num_envs", 3), options.get("rows", 60)
    assert report.transitions == num_envs * rows
    assert report.episodes > 0, "the run should cross an episode end"


@pytest.mark.parametrize("asynchronous", ["restart", "none", "idle", "continue"])
def test_replays_every_async_mode_by_hand(tmp_path: Path, asynchronous: str) -> None:
    path = by_hand.record("CartPole-v1", tmp_path, num_envs=4, rows=80, asynchronous=asynchronous)
    report = replay(path)
    assert report.mismatches == []
    assert report.transitions == 4 * 80 and report.episodes > 0


@pytest.mark.parametrize(("made_as", "read_as"), [("none", "restart"), ("restart", "none")])
def test_the_async_mode_matters(tmp_path: Path, made_as: str, read_as: str) -> None:
    """``none``'s cut envs and common resets are checked, not waved through."""
    path = by_hand.record("CartPole-v1", tmp_path, num_envs=4, rows=80, asynchronous=made_as)
    dataset = load(path)
    dataset.metadata["collector"]["asynchronous"] = read_as
    first = _first_mismatch(_save(dataset, tmp_path / "relabelled.npz"))
    assert first.field == "truncated"


def test_rejects_the_reset_stored_as_a_transition(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    plain = load(by_hand.record("CartPole-v1", tmp_path / "plain", num_envs=2, rows=80))
    path = by_hand.record("CartPole-v1", tmp_path, num_envs=2, rows=80, store_autoreset=True)
    ends = np.argwhere(plain.tensors["terminated"][..., 0] | plain.tensors["truncated"][..., 0])
    t, i = ends[0]
    first = _first_mismatch(path)
    # The row after the first end replays the reset observation, not the final one.
    assert (first.field, first.row) == ("observations", t + 1)
    assert first.env == min(int(e) for e in ends[ends[:, 0] == t][:, 1])


# ----------------------------------------------------------------- corruptions


def _bump(array: np.ndarray) -> None:
    """Change the value's last bit (the smallest change a float or int can have)."""
    flat = array.reshape(-1)
    flat[:1] = (flat[:1].view(f"u{array.dtype.itemsize}") ^ 1).view(array.dtype)


def _flip(array: np.ndarray) -> None:
    array[...] = ~array


def _other_action(array: np.ndarray) -> None:
    array[...] = 1 - array


def _positive_zero(array: np.ndarray) -> None:
    assert np.signbit(array).all() and (array == 0).all()
    array[...] = 0.0


# (tensor, how to change it, which cell: "step", "end" or "negative-zero")
CORRUPTIONS: list[tuple[str, Callable[[np.ndarray], None], str]] = [
    ("observations/pos", _bump, "step"),
    ("observations/phase", _bump, "step"),
    ("observations/sensors/speed", _bump, "step"),
    ("observations/sensors/contact", _bump, "step"),
    ("observations/last/0", _bump, "step"),
    ("next_observations/pos", _bump, "end"),
    ("next_observations/last/1", _bump, "end"),
    ("rewards", _bump, "step"),
    ("rewards", _positive_zero, "negative-zero"),
    ("terminated", _flip, "end"),
    ("truncated", _flip, "step"),
]


@pytest.mark.parametrize(
    ("name", "change", "cell"), CORRUPTIONS, ids=[f"{n}-{c}" for n, _, c in CORRUPTIONS]
)
def test_catches_a_changed_value(
    tmp_path: Path, name: str, change: Callable[[np.ndarray], None], cell: str
) -> None:
    dataset = load(by_hand.record(PUCK, tmp_path, num_envs=3, rows=60))
    t, i = _cell(dataset, cell)
    tensors = {n: np.array(a) for n, a in dataset.tensors.items()}
    change(tensors[name][t, i])
    first = _first_mismatch(_resave(dataset, tensors, tmp_path))
    assert (first.field, first.row, first.env) == (name, t, i)


def test_catches_a_changed_action(tmp_path: Path) -> None:
    """Another valid action: the env's next step, not the action, shows the change."""
    dataset = load(by_hand.record("CartPole-v1", tmp_path, num_envs=3, rows=60))
    tensors = {n: np.array(a) for n, a in dataset.tensors.items()}
    _other_action(tensors["actions"][10, 2])
    first = _first_mismatch(_resave(dataset, tensors, tmp_path))
    assert (first.field, first.row, first.env) == ("next_observations", 10, 2)


def test_catches_an_action_outside_its_space(tmp_path: Path) -> None:
    dataset = load(by_hand.record(PUCK_DICT_ACTIONS, tmp_path, num_envs=2, rows=30))
    tensors = {n: np.array(a) for n, a in dataset.tensors.items()}
    tensors["actions/force"][5, 1] = 3.0
    first = _first_mismatch(_resave(dataset, tensors, tmp_path))
    assert (first.field, first.row, first.env) == ("actions", 5, 1)


def test_catches_swapped_columns_and_a_wrong_seed(tmp_path: Path) -> None:
    dataset = load(by_hand.record("CartPole-v1", tmp_path, num_envs=3, rows=30))
    swapped = {n: np.array(a)[:, [1, 0, 2]] for n, a in dataset.tensors.items()}
    first = _first_mismatch(_resave(dataset, swapped, tmp_path))
    assert (first.field, first.row, first.env) == ("observations", 0, 0)
    dataset.metadata["seed"] += 1
    first = _first_mismatch(_save(dataset, tmp_path / "seed.npz"))
    assert (first.field, first.row, first.env) == ("observations", 0, 0)


def test_rejects_another_layout(tmp_path: Path) -> None:
    """A flattened Dict, or a leaf in another dtype, is reported before any step."""
    dataset = load(by_hand.record(PUCK, tmp_path, num_envs=2, rows=20))
    tensors = dict(dataset.tensors)
    tensors["observations/pos"] = tensors["observations/pos"].astype(np.float64)
    report = replay(_save(Dataset(tensors, dataset.state, dataset.metadata), tmp_path / "a.npz"))
    assert report.transitions == 0
    assert [m.field for m in report.mismatches] == ["observations/pos"]
    flat = {n: a for n, a in dataset.tensors.items() if not n.startswith("observations/")}
    flat["observations"] = np.zeros((20, 2, 11), np.float64)
    report = replay(_save(Dataset(flat, dataset.state, dataset.metadata), tmp_path / "b.npz"))
    assert report.transitions == 0
    assert "missing observations/last/0" in str(report.mismatches[0])
    assert "unexpected observations" in str(report.mismatches[0])


def test_compare_counts_every_bit() -> None:
    nan = np.array([np.nan], np.float32)
    other_nan = (nan.view(np.uint32) | 1).view(np.float32)
    assert compare(nan, nan.copy()) is None
    assert compare(nan, other_nan) is not None
    assert compare(np.array([-0.0]), np.array([0.0])) is not None
    assert compare(np.array([1.0], np.float32), np.array([1.0], np.float64)) is not None
    detail = compare(np.arange(6.0).reshape(2, 3), np.array([[0.0, 1, 2], [3, 9, 9]]))
    assert detail is not None and "[1, 1]" in detail and "2 of 6" in detail


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda m, s: m.update(seed=None), "no seed"),
        (lambda m, s: m["collector"].update(mode="vector"), "vector mode"),
        (lambda m, s: m["collector"].update(steps=10_000), "wrapped"),
        (lambda m, s: s.update(memory_index=5), "wrapped"),
    ],
    ids=["no-seed", "vector", "more-steps-than-stored", "wrapped-state"],
)
def test_says_what_it_cannot_replay(tmp_path: Path, edit: Any, reason: str) -> None:
    dataset = load(by_hand.record("CartPole-v1", tmp_path, num_envs=2, rows=20))
    state = {"memory_index": 0, "env_index": 0, "filled": True}
    edit(dataset.metadata, state)
    changed = Dataset(dataset.tensors, CircularState(**state), dataset.metadata)
    path = _save(changed, tmp_path / "c.npz")
    with pytest.raises(CannotReplay, match=reason):
        replay(path)


def test_a_text_leaf_cannot_be_replayed(tmp_path: Path) -> None:
    require(("minigrid",))
    dataset = load(by_hand.record(MINIGRID, tmp_path, wrappers=(DROP_MISSION,), rows=10))
    del dataset.metadata["wrappers"]
    with pytest.raises(CannotReplay, match="mission"):
        replay(_save(dataset, tmp_path / "no-wrapper.npz"))


# ----------------------------------------------------------------- helpers


def _save(dataset: Dataset, path: Path) -> Path:
    return save(dataset, path)


def _resave(dataset: Dataset, tensors: dict[str, np.ndarray], folder: Path) -> Path:
    """The dataset with other tensors, saved beside the original."""
    return save(Dataset(tensors, dataset.state, dataset.metadata), folder / "changed.npz")


def _first_mismatch(path: Path) -> Mismatch:
    report = replay(path)
    assert report.mismatches, "the oracle missed the change"
    return report.mismatches[0]


def _cell(dataset: Dataset, kind: str) -> tuple[int, int]:
    """A (row, env) of the kind asked for: a plain step, an episode end, a -0.0 reward."""
    ends = dataset.tensors["terminated"][..., 0] | dataset.tensors["truncated"][..., 0]
    if kind == "end":
        cells = np.argwhere(ends)
    elif kind == "negative-zero":
        rewards = dataset.tensors["rewards"][..., 0]
        cells = np.argwhere(np.signbit(rewards) & (rewards == 0))
    else:
        cells = np.argwhere(~ends)
    assert cells.size, f"the recorded run has no {kind} cell"
    t, i = cells[len(cells) // 2]
    return int(t), int(i)
