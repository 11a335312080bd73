"""summarize() against numpy on whole arrays: every format, wrapped or not, NaN/inf."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from expcli import summarize
from expcli.formats import read_dataset, write_dataset
from expcli.spec import CircularState
from expcli.summary.chronology import segments
from tests.format_catalogue import FILE_FORMATS, suffix_of
from tests.summary.datasets import random_dataset
from tests.summary.reference import check_summary

STATES = {
    "full-in-order": CircularState(0, 0, True),
    "wrapped": CircularState(4, 0, True),
    "wrapped-partial-row": CircularState(2, 2, True),
    "unwrapped": CircularState(5, 0, False),
    "unwrapped-partial-row": CircularState(3, 1, False),
    "empty": CircularState(0, 0, False),
    "one-transition": CircularState(0, 1, False),
}


@pytest.mark.parametrize("fmt", FILE_FORMATS)
@pytest.mark.parametrize("state", list(STATES.values()), ids=list(STATES))
def test_every_number_matches_numpy(tmp_path: Path, fmt: str, state: CircularState) -> None:
    dataset = random_dataset(state=state, seed=FILE_FORMATS.index(fmt))
    path = write_dataset(dataset, tmp_path / f"d{suffix_of(fmt)}")
    summary = summarize(path)
    assert summary.format == fmt
    assert summary.layout == "expcli"
    assert summary.wrapped == (state.filled and (state.memory_index, state.env_index) != (0, 0))
    check_summary(summary, dataset, wrapped=summary.wrapped)


@pytest.mark.parametrize("fmt", FILE_FORMATS)
def test_nan_and_inf_are_counted_and_left_out(tmp_path: Path, fmt: str) -> None:
    dataset = random_dataset(state=CircularState(3, 1, True), seed=5)
    obs = dataset.tensors["observations"]
    obs[0, 0, 0], obs[2, 1, 1], obs[6, 2, 0] = np.nan, np.inf, -np.inf
    dataset.tensors["rewards"][1, 1, 0] = np.nan
    path = write_dataset(dataset, tmp_path / f"nan{suffix_of(fmt)}")
    summary = summarize(path)
    stats = {t.name: t for t in summary.tensors}
    assert (stats["observations"].nan, stats["observations"].inf) == (1, 2)
    assert stats["rewards"].nan == 1
    check_summary(summary, dataset, wrapped=True)


def test_all_nan_tensor_has_null_statistics(tmp_path: Path) -> None:
    dataset = random_dataset(seed=2)
    dataset.tensors["log_prob"][:] = np.nan
    summary = summarize(write_dataset(dataset, tmp_path / "d.npz"))
    entry = next(t for t in summary.to_json()["tensors"] if t["name"] == "log_prob")
    assert entry["nan"] == 21 and entry["min"] is None and entry["std"] is None


def test_zero_complete_episodes(tmp_path: Path) -> None:
    dataset = random_dataset(seed=3, done_rate=0.0)
    summary = summarize(write_dataset(dataset, tmp_path / "d.h5"))
    episodes = summary.to_json()["episodes"]
    assert episodes["complete"] == 0 and episodes["incomplete"] == 3
    assert set(episodes["return"].values()) == {None}
    assert episodes["histogram"] == {"edges": [], "counts": []}


def test_episodes_can_be_left_out_and_without_flags_there_are_none(tmp_path: Path) -> None:
    dataset = random_dataset(seed=4)
    path = write_dataset(dataset, tmp_path / "d.npz")
    assert summarize(path, episodes=False).episodes is None
    del dataset.tensors["terminated"], dataset.tensors["truncated"]
    assert summarize(write_dataset(dataset, tmp_path / "e.npz")).episodes is None


def test_without_rewards_lengths_are_known_returns_are_not(tmp_path: Path) -> None:
    dataset = random_dataset(seed=6, state=CircularState(2, 0, True))
    del dataset.tensors["rewards"]
    summary = summarize(write_dataset(dataset, tmp_path / "d.npz"))
    check_summary(summary, dataset, wrapped=True)
    assert summary.episodes is not None and summary.episodes.lengths.mean > 0


def test_head_is_the_first_transitions_in_chronological_order(tmp_path: Path) -> None:
    state = CircularState(2, 1, True)
    dataset = random_dataset(state=state, seed=7)
    summary = summarize(write_dataset(dataset, tmp_path / "d.npz"), head=5)
    order = [(r, e) for s in segments(state, 7, 3) for r in range(s.start, s.stop)
             for e in range(s.first, s.last)]  # fmt: skip
    assert order[:5] == [(2, 1), (2, 2), (3, 0), (3, 1), (3, 2)]
    assert [(h["row"], h["env"]) for h in summary.head] == order[:5]
    first = summary.head[0]
    assert first["observations"] == dataset.tensors["observations"][2, 1].tolist()
    assert len(summarize(tmp_path / "d.npz", head=1000).head) == 21


def test_chunks_do_not_change_the_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many small chunks (one row each) give what one chunk gives."""
    import expcli.summary.chronology as chronology

    dataset = random_dataset(size=40, envs=3, state=CircularState(17, 2, True), seed=8)
    path = write_dataset(dataset, tmp_path / "d.h5")
    whole = summarize(path, check=True).to_json()
    monkeypatch.setattr(chronology, "PASS_CHUNK_BYTES", 1)
    monkeypatch.setattr(chronology.chunks, "__defaults__", (1,))
    chunked = _leaves(summarize(path, check=True).to_json())
    expected = _leaves(whole)
    assert chunked.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, float):
            assert chunked[key] == pytest.approx(value, rel=1e-12), key
        else:
            assert chunked[key] == value, key
    check_summary(summarize(path), read_dataset(path), wrapped=True)


def _leaves(value: object, prefix: str = "") -> dict[str, object]:
    """A JSON value as ``{path: leaf}``, for comparisons with a tolerance."""
    if isinstance(value, dict):
        return {
            k: v for key, item in value.items() for k, v in _leaves(item, f"{prefix}/{key}").items()
        }
    if isinstance(value, list):
        return {
            k: v for i, item in enumerate(value) for k, v in _leaves(item, f"{prefix}/{i}").items()
        }
    return {prefix: value}
