"""Dataset cards (``formats.dataset_card``): what HF ``datasets`` and the Hub read of a folder.

The real ``datasets`` loads the Parquet folders of ``convert`` and ``collect`` through the
card's ``configs`` with no "Repo card metadata block was not found" warning, and a folder
grown by ``--resume`` is read again, not from the stale cache; the YAML parses with
``yaml.safe_load`` whatever the metadata strings hold; the episode returns are those of
the data, a wrapped memory's included; LeRobot and Minari folders carry a card too.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from expcli.cli import app
from expcli.conversion import convert, load, save
from expcli.errors import ConfigError
from expcli.formats import Dataset
from expcli.formats.dataset_card import (
    MARK,
    EpisodeTally,
    checked_license,
    size_category,
    tally_rows,
)
from expcli.spec import CircularState, chronological_rows, overwritten_columns

pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")
yaml = pytest.importorskip("yaml")

ENV_ID = 'ale_py:ALE/Pong-v5\n---\nlicense: "mit" # "quoted" `tick`'


def _run(size: int = 60, envs: int = 3, env_id: str = "X-v0", seed: int = 3) -> Dataset:
    rng = np.random.default_rng(seed)
    return Dataset(
        {
            "observations": rng.standard_normal((size, envs, 4)).astype(np.float32),
            "actions": rng.integers(0, 4, (size, envs, 1)),
            "rewards": rng.standard_normal((size, envs, 1)).astype(np.float32),
            "terminated": rng.random((size, envs, 1)) < 0.1,
            "truncated": rng.random((size, envs, 1)) < 0.05,
        },
        CircularState(0, 0, True, size * envs),
        {"env_id": env_id, "seed": 7, "collector": {"mode": "dummy", "policy": {"spec": "p:q"}}},
    )


def _front(card: str) -> dict[str, Any]:
    """The card's YAML block, parsed safely."""
    head, block, _ = card.split("---\n", 2)
    assert head == ""
    found: dict[str, Any] = yaml.safe_load(block)
    return found


def _load(folder: Path, cache: Path, caplog: pytest.LogCaptureFixture) -> Any:
    """``datasets.load_dataset(folder)``, asserting no record says the card has no YAML."""
    from datasets import load_dataset

    caplog.clear()
    with caplog.at_level(logging.INFO):
        ds = load_dataset(str(folder), split="train", cache_dir=str(cache))
    said = [r.getMessage() for r in caplog.records if "metadata block" in r.getMessage()]
    assert said == []
    return ds


def _returns(dataset: Dataset) -> list[float]:
    """Each complete episode's return, walking every env column oldest first."""
    size, envs, state = dataset.memory_size, dataset.num_envs, dataset.state
    order = chronological_rows(state, size, envs)
    _, valid = state.columns(size, envs)
    cut = overwritten_columns(state, size, envs, dataset.metadata)
    rewards = np.asarray(dataset.tensors["rewards"]).reshape(size, envs)
    done = np.zeros((size, envs), bool)
    for flag in ("terminated", "truncated"):
        done |= np.asarray(dataset.tensors[flag]).reshape(size, envs) != 0
    found = []
    for j in range(envs):
        running, counting = 0.0, not cut[j]
        for row in order[j, : valid[j]]:
            running += float(rewards[row, j])
            if done[row, j]:
                if counting:
                    found.append(running)
                running, counting = 0.0, True
    return found


def test_a_converted_parquet_folder_loads_through_its_card(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dataset = _run(env_id=ENV_ID)
    save(dataset, tmp_path / "run.npz")
    folder = tmp_path / "pq"
    convert(tmp_path / "run.npz", folder, shard_format="parquet", license="Apache-2.0")
    card = (folder / "README.md").read_text(encoding="utf-8")
    front = _front(card)
    assert front["license"] == "apache-2.0"
    assert front["task_categories"] == ["reinforcement-learning"]
    assert front["tags"] == ["expcli", ENV_ID.split(":", 1)[1]]  # one tag, whole, no module
    assert front["size_categories"] == ["n<1K"]
    config = front["configs"][0]
    assert config["config_name"] == "default"
    assert config["data_files"] == [{"split": "train", "path": "shard-*.parquet"}]
    ds = _load(folder, tmp_path / "cache", caplog)
    assert ds.num_rows == 180
    got = np.asarray(ds.with_format("numpy")["rewards"], np.float32)
    order = np.argsort(np.asarray(ds["index"]))
    assert got[order].tobytes() == dataset.tensors["rewards"].reshape(-1).tobytes()
    returns = _returns(dataset)
    assert f"{len(returns):,} complete episodes; return mean {np.mean(returns):.6g}" in card
    assert f"min {min(returns):.6g}, max {max(returns):.6g}" in card
    assert "- policy: `p:q`" in card and "- seed: `7`" in card and "- envs: `3`" in card


def test_a_collected_folder_loads_and_is_read_again_after_a_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder, cache = tmp_path / "run", tmp_path / "cache"
    first = ["collect", "CartPole-v1", "--envs", "2", "--steps", "200", "--seed", "1"]
    options = ["-o", str(folder), "--shard-format", "parquet", "--shard-size", "50", "-q"]
    result = CliRunner().invoke(app, [*first, *options, "--license", "mit"])
    assert result.exit_code == 0, result.output
    front = _front((folder / "README.md").read_text(encoding="utf-8"))
    assert front["license"] == "mit" and front["tags"] == ["expcli", "CartPole-v1"]
    assert _load(folder, cache, caplog).num_rows == 200
    result = CliRunner().invoke(app, ["collect", "--resume", str(folder), "--steps", "400", "-q"])
    assert result.exit_code == 0, result.output
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert _front(card)["license"] == "mit"  # recorded with the run's settings
    assert _load(folder, cache, caplog).num_rows == 400  # not the cache of 200
    data = load(folder)
    returns = _returns(data)
    assert len(returns) == data.metadata["collector"]["complete_episodes_in_file"]
    assert f"{len(returns):,} complete episodes; return mean {np.mean(returns):.6g}" in card
    assert not list(folder.glob(".*tmp"))  # every card written by a rename


def test_the_card_follows_the_shards_as_they_land(tmp_path: Path) -> None:
    """A collect's ShardWriter writes the card again after each shard: counts grow."""
    from expcli.formats import sharded
    from expcli.formats.sharded import ShardWriter, new_manifest
    from expcli.formats.table import format_named

    dataset = _run(size=40, envs=2)
    shard = format_named("parquet")
    empty = Dataset({k: v[:0] for k, v in dataset.tensors.items()}, metadata=dataset.metadata)
    folder = tmp_path / "live"
    writer = ShardWriter(folder, new_manifest(empty.header(), shard), license="mit")
    metadata = sharded.user_metadata(writer.manifest.header)
    seen = []
    for start in range(0, 40, 10):
        part = {k: v[start : start + 10] for k, v in dataset.tensors.items()}
        writer.append(part, metadata)
        card = (folder / "README.md").read_text(encoding="utf-8")
        seen.append((_front(card)["configs"][0]["description"], card.split("\n\n")[3]))
        assert f"{(start + 10) * 2:,} transitions" in card
    assert len({description for description, _ in seen}) == 4  # a fingerprint per shard list
    whole = _returns(dataset)
    assert f"{len(whole):,} complete episodes; return mean {np.mean(whole):.6g}" in card


def test_a_readme_expcli_did_not_write_is_left_alone(tmp_path: Path) -> None:
    save(_run(), tmp_path / "run.npz")
    folder = tmp_path / "pq"
    convert(tmp_path / "run.npz", folder, shard_format="parquet")
    assert MARK in (folder / "README.md").read_text(encoding="utf-8")
    (folder / "README.md").write_text("# mine\n", encoding="utf-8")
    from expcli.formats.sharded import Manifest, ShardWriter

    ShardWriter(folder, Manifest.load(folder)).replace_metadata({"env_id": "Y-v0"})
    assert (folder / "README.md").read_text(encoding="utf-8") == "# mine\n"


def test_lerobot_and_minari_folders_carry_a_card(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    save(_run(env_id="CartPole-v1"), tmp_path / "run.npz")
    convert(tmp_path / "run.npz", tmp_path / "lr", layout="lerobot", license="cc-by-4.0")
    with pytest.warns(UserWarning, match="minari layout does not keep"):
        convert(tmp_path / "run.npz", tmp_path / "m-v0", layout="minari")
    with pytest.warns(UserWarning, match="minari layout does not keep"):
        convert(tmp_path / "run.npz", tmp_path / "mp-v0", layout="minari", to="parquet")
    lerobot = _front((tmp_path / "lr" / "README.md").read_text(encoding="utf-8"))
    assert lerobot["license"] == "cc-by-4.0"
    assert lerobot["tags"] == ["expcli", "LeRobot", "CartPole-v1"]
    assert lerobot["configs"][0]["data_files"][0]["path"] == "data/*/*.parquet"
    assert _load(tmp_path / "lr", tmp_path / "cache", caplog).num_rows == 180
    hdf5 = (tmp_path / "m-v0" / "README.md").read_text(encoding="utf-8")
    assert "configs" not in _front(hdf5) and "cannot read HDF5" in hdf5
    assert _front(hdf5)["tags"] == ["expcli", "Minari", "CartPole-v1"]
    parquet = _front((tmp_path / "mp-v0" / "README.md").read_text(encoding="utf-8"))
    assert parquet["configs"][0]["data_files"][0]["path"] == "data/*/*.parquet"
    episodes = len(_returns(load(tmp_path / "run.npz")))
    loaded = _load(tmp_path / "mp-v0", tmp_path / "cache", caplog)
    assert loaded.num_rows > 180  # a row a step, and one more an episode (Minari's layout)
    for folder in ("lr", "m-v0", "mp-v0"):  # expcli reads its folders with their cards
        assert len(load(tmp_path / folder)) == 180
        assert f"{episodes:,} complete episodes" in (tmp_path / folder / "README.md").read_text()


def test_a_license_that_is_no_identifier_is_refused_in_one_line(tmp_path: Path) -> None:
    save(_run(), tmp_path / "run.npz")
    result = CliRunner().invoke(
        app, ["convert", str(tmp_path / "run.npz"), str(tmp_path / "pq"), "--license", "a: b"]
    )
    assert result.exit_code == 2 and "--license" in result.output
    assert not (tmp_path / "pq").exists()
    with pytest.raises(ConfigError, match="--license"):
        checked_license("mit\nlicense: other")


def test_size_categories_are_the_hubs_buckets() -> None:
    assert [size_category(n) for n in (0, 999, 1000, 9_999, 10_000, 999_999, 10**6)] == [
        "n<1K",
        "n<1K",
        "1K<n<10K",
        "1K<n<10K",
        "10K<n<100K",
        "100K<n<1M",
        "1M<n<10M",
    ]
    assert size_category(10**13) == "n>1T"


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 25),
    envs=st.integers(1, 4),
    head=st.integers(0, 24),
    column=st.integers(0, 3),
    filled=st.booleans(),
    chunk=st.integers(1, 40),
    seed=st.integers(0, 2**16),
)
def test_tally_counts_the_complete_episodes_of_any_circular_state(
    size: int, envs: int, head: int, column: int, filled: bool, chunk: int, seed: int
) -> None:
    import expcli.formats._episode_returns as card

    dataset = _run(size, envs, seed=seed)
    state = CircularState(head % size, column % envs, filled)
    wrapped = Dataset(dataset.tensors, state, {})
    before, card._CHUNK_CELLS = card._CHUNK_CELLS, chunk  # chunks of any size cut anywhere
    try:
        tally = tally_rows(wrapped.tensors, state, {}, size, envs)
    finally:
        card._CHUNK_CELLS = before
    want = _returns(wrapped)
    assert tally.count == len(want)
    if want:
        assert np.isclose(tally.total, sum(want)) and tally.low == pytest.approx(min(want))
        assert tally.high == pytest.approx(max(want))
    fed = EpisodeTally(envs)  # the same rows fed in order, as a collect's shards land
    if not filled:
        fed.add_tensors(wrapped.tensors, size)
        assert fed.count == len(_returns(Dataset(dataset.tensors, CircularState(0, 0, True), {})))


def test_a_kill_9_leaves_a_whole_card_and_resume_brings_it_up_to_date(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A collect killed while its shards land: the card parses (never half-written)."""
    import json
    import signal
    import subprocess
    import time

    from tests.collect.test_folder_collect import ENV, EXPCLI, expcli_cli

    folder = tmp_path / "run"
    run = ["collect", "CartPole-v1", "--envs", "2", "--steps", "10000000", "--mode", "dummy"]
    shards = ["--shard-format", "parquet", "--shard-size", "20", "-o", str(folder), "-q"]
    child = subprocess.Popen([*EXPCLI, *run, *shards], env=ENV, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            manifest = folder / "manifest.json"
            if manifest.exists() and len(json.loads(manifest.read_text())["shards"]) >= 5:
                break
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert _front(card)["configs"][0]["data_files"][0]["path"] == "shard-*.parquet"
    assert card.rstrip().endswith("```")  # whole, to its last section
    stored = json.loads((folder / "manifest.json").read_text())["memory_size"] * 2
    expcli_cli("collect", "--resume", str(folder), "--steps", str(stored + 100), "-q")
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert f"{stored + 100:,} transitions" in card
    assert _load(folder, tmp_path / "cache", caplog).num_rows == stored + 100


def test_rewards_of_nan_and_inf_give_such_returns_without_a_warning() -> None:
    """A NaN or infinite reward is data: its episode's return says so, nothing is raised."""
    rewards = np.array([[np.nan, 1.0], [1.0, np.inf], [2.0, -np.inf]])
    done = np.array([[False, False], [True, True], [False, True]])
    tally = EpisodeTally(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tally.add(rewards, done)
    assert tally.count == 3 and np.isnan(tally.total)
    assert "3 complete episodes" in tally.summary()
