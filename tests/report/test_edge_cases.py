"""Reports of datasets that lack something: no done flags, no rewards, no complete episode;
and of structured, continuous and text leaves, each named in the charts and the player."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from expcli.formats import Dataset, write_dataset
from expcli.report import write_report
from expcli.spec import CircularState
from tests.report.datasets import frames_dataset
from tests.report.page_data import carried


def _report(tmp_path: Path, dataset: Dataset) -> tuple[str, dict]:
    source = write_dataset(dataset, tmp_path / "d.npz")
    page = tmp_path / "r.html"
    write_report(source, html=page, random_episodes=1)
    return page.read_text(encoding="utf-8"), carried(page, "player-data")


def test_without_done_flags_there_is_nothing_to_play(tmp_path: Path) -> None:
    data = frames_dataset(12, 1)
    del data.tensors["terminated"], data.tensors["truncated"]
    text, player = _report(tmp_path, data)
    assert player["episodes"] == [] and "No complete episode to play." in text
    assert 'id="chart-observations"' in text and 'id="complete-episodes"' not in text


def test_without_a_complete_episode_there_is_nothing_to_play(tmp_path: Path) -> None:
    data = frames_dataset(12, 2)
    data.tensors["terminated"][:] = False
    data.tensors["truncated"][:] = False
    text, player = _report(tmp_path, data)
    assert player["episodes"] == [] and 'data-count="0"' in text


def test_without_rewards_episodes_are_ranked_by_length(tmp_path: Path) -> None:
    data = frames_dataset(40, 2)
    del data.tensors["rewards"]
    text, player = _report(tmp_path, data)
    best = next(e for e in player["episodes"] if "best" in e["names"])
    assert best["length"] == max(e["length"] for e in player["episodes"])
    assert all(e["rewards"] is None for e in player["episodes"])
    assert 'id="chart-returns"' not in text and 'id="chart-lengths"' in text


def test_structured_continuous_and_text_leaves(tmp_path: Path) -> None:
    rows, envs = 30, 2
    rng = np.random.default_rng(0)
    terminated = np.zeros((rows, envs, 1), bool)
    terminated[4::6] = True
    codes = np.zeros((rows, envs, 5), np.int32)
    codes[..., :2] = [ord("h"), ord("i")]
    tensors = {
        "observations/pos": rng.uniform(-2, 2, (rows, envs, 3)).astype(np.float32),
        "observations/mission": codes,
        "actions/move": rng.integers(0, 3, (rows, envs, 1)),
        "actions/force": rng.uniform(-1, 1, (rows, envs, 2)).astype(np.float32),
        "rewards": rng.normal(size=(rows, envs, 1)).astype(np.float32),
        "terminated": terminated,
        "truncated": np.zeros((rows, envs, 1), bool),
        "infos/lives": rng.integers(0, 3, (rows, envs)),
    }
    box = {"type": "Box", "low": -1.0, "high": 1.0, "shape": [3], "dtype": "float32"}
    metadata = {
        "observation_space": {"type": "Dict", "spaces": {
            "pos": box,
            "mission": {"type": "Text", "max_length": 5, "min_length": 1, "charset": "hi"}}},
        "action_space": {"type": "Dict", "spaces": {
            "move": {"type": "Discrete", "n": 3},
            "force": {"type": "Box", "low": -1.0, "high": 1.0, "shape": [2],
                      "dtype": "float32"}}},
    }  # fmt: skip
    text, player = _report(tmp_path, Dataset(tensors, CircularState(0, 0, True), metadata))
    for chart in ("observations-pos", "actions-move", "actions-force", "rewards", "infos-lives"):
        assert f'id="chart-{chart}"' in text, chart
    assert "outside the space" in text  # pos is drawn from -2..2 against bounds of -1..1
    episode = player["episodes"][0]
    assert set(episode["series"]) == {"observations/pos", "actions/move", "actions/force"}
    assert len(episode["series"]["observations/pos"][0]) == 3
    assert set(episode["texts"]["observations/mission"]) == {"hi"}
    assert ">observations/pos<" in text and ">actions/force<" in text  # named in the strips


def test_text_from_the_file_cannot_break_out_of_the_page(tmp_path: Path) -> None:
    hostile = '</script><script>alert("x")</script><img src=x onerror=alert(1)>'
    data = frames_dataset(20, 1)
    data.metadata["env_id"] = hostile
    data.tensors[f"infos/{hostile[:9]}"] = np.zeros((20, 1), np.int64)
    text, _ = _report(tmp_path, data)
    assert "<script>alert" not in text and "<img src=x" not in text
    assert text.count("<script") == 3  # the summary's JSON, the player's, the player
    assert carried(tmp_path / "r.html", "summary-json")["metadata"]["env_id"] == hostile
