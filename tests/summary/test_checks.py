"""``--check``: a real CartPole dataset passes every check; each check fails on a dataset
built to fail it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from expcli import summarize
from expcli.formats import Dataset, write_dataset
from expcli.formats.layouts import write_layout
from expcli.spec import METADATA_KEY, CircularState
from expcli.summary import Finding, Summary
from tests.format_catalogue import SUFFIXES
from tests.summary.reference import check_summary

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")


def _space_json(space: Any) -> dict[str, Any]:
    """Spaces as the collector describes them (infinite bounds as strings)."""
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    bound = lambda a: [("inf" if v > 0 else "-inf") if np.isinf(v) else float(v) for v in a]  # noqa: E731
    return {
        "type": "Box",
        "low": bound(space.low),
        "high": bound(space.high),
        "shape": list(space.shape),
        "dtype": str(space.dtype),
    }


def cartpole(steps: int = 120, envs: int = 3, size: int | None = None) -> Dataset:
    """Step real CartPole envs by hand, resetting an env as soon as its episode ends
    (asynchronous="restart"): the ended row's next observation is the final one, the
    next row starts from the reset observation. ``size`` < ``steps`` wraps the memory."""
    import gymnasium as gym

    size = size or steps
    env_list = [gym.make("CartPole-v1", max_episode_steps=30) for _ in range(envs)]
    rng = np.random.default_rng(3)  # a seed whose time limits never meet a termination
    obs = np.stack([e.reset(seed=i)[0] for i, e in enumerate(env_list)])
    tensors = {
        "observations": np.zeros((size, envs, 4), np.float32),
        "next_observations": np.zeros((size, envs, 4), np.float32),
        "actions": np.zeros((size, envs, 1), np.int64),
        "rewards": np.zeros((size, envs, 1), np.float32),
        "terminated": np.zeros((size, envs, 1), bool),
        "truncated": np.zeros((size, envs, 1), bool),
    }
    for t in range(steps):
        row = t % size
        for j, env in enumerate(env_list):
            action = int(rng.integers(2))
            nxt, reward, term, trunc, _ = env.step(action)
            values = (obs[j], nxt, [action], [reward], [term], [trunc])
            for name, value in zip(tensors, values, strict=True):
                tensors[name][row, j] = value
            obs[j] = env.reset()[0] if term or trunc else nxt
    for env in env_list:
        env.close()
    # Gymnasium may end an episode both ways at once; this data set must not, to pass.
    assert not (tensors["terminated"] & tensors["truncated"]).any()
    state = (
        CircularState(steps % size, 0, True) if steps >= size else CircularState(steps, 0, False)
    )
    metadata = {
        "env_id": "CartPole-v1",
        "observation_space": _space_json(env_list[0].observation_space),
        "action_space": _space_json(env_list[0].action_space),
        "num_envs": envs,
        "collector": {"mode": "dummy", "asynchronous": "restart", "steps": steps},
    }
    return Dataset(tensors, state, metadata)


def _by_check(summary: Summary) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for finding in summary.checks or ():
        out.setdefault(finding.check, []).append(finding)
    return out


def _failed(summary: Summary, check: str) -> Finding:
    found = [f for f in _by_check(summary).get(check, []) if f.failed]
    assert found, (check, summary.checks)
    return found[0]


@pytest.mark.parametrize("size", [None, 50], ids=["unwrapped", "wrapped"])
@pytest.mark.parametrize("suffix", SUFFIXES)
def test_real_cartpole_passes_every_check(tmp_path: Path, size: int | None, suffix: str) -> None:
    dataset = cartpole(size=size)
    summary = summarize(write_dataset(dataset, tmp_path / f"cp{suffix}"), check=True)
    assert summary.checks is not None and not summary.failed, summary.checks
    statuses = {f.check: f.status for f in summary.checks}
    for check in ("continuity", "autoreset", "both_flags", "finite", "metadata"):
        assert statuses[check] == "passed", check
    assert statuses["action_space"] == statuses["observation_space"] == "passed"
    assert summary.wrapped == (size is not None)
    assert summary.episodes is not None and summary.episodes.complete > 2
    check_summary(summary, dataset, wrapped=summary.wrapped)


def test_continuity(tmp_path: Path) -> None:
    dataset = cartpole(steps=40)
    ends = dataset.tensors["terminated"][:, 1, 0] | dataset.tensors["truncated"][:, 1, 0]
    t = int(np.flatnonzero(~ends[:-1])[3])
    dataset.tensors["next_observations"][t, 1, 2] += 0.25
    summary = summarize(write_dataset(dataset, tmp_path / "c.npz"), check=True)
    finding = _failed(summary, "continuity")
    assert finding.count == 1 and finding.rows == ((t, 1),)


def test_continuity_across_chunks_and_the_wrap(tmp_path: Path, monkeypatch: Any) -> None:
    import expcli.summary.chronology as chronology

    dataset = cartpole(steps=90, size=40)  # oldest row 10; row 39 is followed by row 0
    done = dataset.tensors["terminated"][:, 0, 0] | dataset.tensors["truncated"][:, 0, 0]
    assert not done[39]
    dataset.tensors["observations"][0, 0, 0] += 1.0
    monkeypatch.setattr(chronology.chunks, "__defaults__", (1,))  # one row per chunk
    summary = summarize(write_dataset(dataset, tmp_path / "w.h5"), check=True)
    assert _failed(summary, "continuity").rows == ((39, 0),)


def test_autoreset_rows_recorded_as_data(tmp_path: Path) -> None:
    """gymnasium's next-step autoreset recorded naively: after an end, a row whose
    observation is the final observation, with reward 0."""
    dataset = cartpole(steps=60, envs=1)
    tensors = dataset.tensors
    done = tensors["terminated"][:, 0, 0] | tensors["truncated"][:, 0, 0]
    t = int(np.flatnonzero(done)[0])
    final = tensors["next_observations"][t, 0].copy()
    tensors["observations"][t + 1, 0] = final
    tensors["rewards"][t + 1, 0] = 0
    tensors["next_observations"][t + 1, 0] = tensors["observations"][t + 2, 0]
    summary = summarize(write_dataset(dataset, tmp_path / "a.npz"), check=True)
    assert _failed(summary, "autoreset").rows == ((t + 1, 0),)
    assert _by_check(summary)["continuity"][0].status == "passed"


def test_both_flags(tmp_path: Path) -> None:
    dataset = cartpole(steps=40)
    dataset.tensors["terminated"][7, 2] = dataset.tensors["truncated"][7, 2] = True
    summary = summarize(write_dataset(dataset, tmp_path / "b.npz"), check=True)
    [finding] = _by_check(summary)["both_flags"]
    assert finding.status == "note" and finding.rows == ((7, 2),)
    assert not summary.failed  # valid data: TimeLimit on a terminating last step


def test_nan_in_written_rows_but_not_in_unwritten_ones(tmp_path: Path) -> None:
    dataset = cartpole(steps=30, size=40)  # rows 30.. are unwritten
    dataset.tensors["rewards"][30:] = np.nan
    clean = summarize(write_dataset(dataset, tmp_path / "clean.npz"), check=True)
    assert not clean.failed
    dataset.tensors["rewards"][4, 1] = np.inf
    dataset.tensors["observations"][9, 0, 3] = np.nan
    summary = summarize(write_dataset(dataset, tmp_path / "nan.npz"), check=True)
    found = {f.message: f for f in _by_check(summary)["finite"]}
    assert {f.rows for f in found.values()} == {((4, 1),), ((9, 0),)}


def test_nan_in_an_info_tensor_is_not_reported_but_inf_is(tmp_path: Path) -> None:
    """``collect --infos`` stores NaN where an env did not report a key that step."""
    dataset = cartpole(steps=30)
    info = np.full((30, 3, 1), np.nan)
    info[::5, 0] = 1.0
    dataset.tensors["infos/lives"] = info
    assert not summarize(write_dataset(dataset, tmp_path / "i.npz"), check=True).failed
    info[7, 2] = np.inf
    summary = summarize(write_dataset(dataset, tmp_path / "inf.npz"), check=True)
    assert _failed(summary, "finite").rows == ((7, 2),)


def test_action_outside_the_action_space(tmp_path: Path) -> None:
    dataset = cartpole(steps=30)
    dataset.tensors["actions"][5, 1] = 2
    summary = summarize(write_dataset(dataset, tmp_path / "act.npz"), check=True)
    finding = _failed(summary, "action_space")
    assert finding.rows == ((5, 1),) and "Discrete(2)" in finding.message


def test_observation_outside_its_box(tmp_path: Path) -> None:
    dataset = cartpole(steps=30)
    dataset.tensors["observations"][3, 0, 0] = 7.5  # |x| <= 4.8
    summary = summarize(write_dataset(dataset, tmp_path / "obs.npz"), check=True)
    assert _failed(summary, "observation_space").rows == ((3, 0),)


def test_metadata_dtype_and_shape_disagree_with_the_spaces(tmp_path: Path) -> None:
    dataset = cartpole(steps=20)
    dataset.tensors["observations"] = dataset.tensors["observations"].astype(np.float64)
    dataset.metadata["action_space"] = {"type": "Box", "low": [0, 0], "high": [1, 1],
                                        "shape": [2], "dtype": "float32"}  # fmt: skip
    summary = summarize(write_dataset(dataset, tmp_path / "m.npz"), check=True)
    message = _failed(summary, "metadata").message
    assert "float64" in message and "feature shape (1,)" in message


def test_metadata_sizes_disagree_with_the_data(tmp_path: Path) -> None:
    """The readers refuse such a file; --check reports it as a failed check."""
    path = write_dataset(cartpole(steps=20), tmp_path / "n.npz")
    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    header = json.loads(str(arrays[METADATA_KEY]))
    header["num_envs"] = 5
    arrays[METADATA_KEY] = np.array(json.dumps(header))
    np.savez(path, **arrays)
    summary = summarize(path, check=True)
    assert "num_envs" in _failed(summary, "metadata").message and summary.error


def test_d4rl_without_terminals_or_timeouts(tmp_path: Path) -> None:
    path = tmp_path / "d4rl.hdf5"
    with h5py.File(path, "w") as f:
        f["observations"] = np.zeros((10, 3), np.float32)
        f["actions"] = np.zeros((10, 1), np.float32)
        f["rewards"] = np.ones(10, np.float32)
    summary = summarize(path, check=True)
    assert summary.layout == "d4rl"
    assert _failed(summary, "d4rl_flags").count == 1
    with h5py.File(path, "a") as f:
        f["timeouts"] = np.zeros(10, bool)
    assert _by_check(summarize(path, check=True))["d4rl_flags"][0].status == "passed"


def test_minari_episode_with_as_many_observations_as_actions(tmp_path: Path) -> None:
    folder = write_layout(cartpole(steps=60, envs=2), tmp_path / "ds-v0", "minari", overwrite=False)
    main = folder / "data" / "main_data.hdf5"
    with h5py.File(main, "a") as f:
        observations = f["episode_2/observations"][:-1]
        del f["episode_2/observations"]
        f["episode_2/observations"] = observations
    for target in (folder, main):
        summary = summarize(target, check=True)
        finding = _failed(summary, "minari_episodes")
        assert finding.count == 1 and finding.message.endswith(": 2") and summary.error
        assert summary.layout == "minari"
    assert summary.failed
