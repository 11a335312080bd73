"""Minari datasets in parquet and arrow storage: loaded by Minari, and made by Minari."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli import convert, load
from expcli.errors import ConfigError, FormatError, SchemaError
from expcli.formats import Dataset, open_lazy
from expcli.formats.layouts import write_layout
from expcli.formats.layouts.minari.arrow import LOSSES_KEY
from expcli.formats.layouts.minari.layout import read_folder as read_minari_folder
from expcli.spec import CircularState

minari = pytest.importorskip("minari")
pytest.importorskip("pyarrow")
gym = pytest.importorskip("gymnasium")
EpisodeBuffer = pytest.importorskip("minari.data_collector").EpisodeBuffer

STORAGES = ("parquet", "arrow")


def chain(observations: np.ndarray, ends: list[int], **tensors: Any) -> Dataset:
    """One env column whose next observations are the next rows (``observations`` has T+1)."""
    steps = len(observations) - 1
    terminated = np.zeros((steps, 1, 1), bool)
    terminated[ends] = True
    rng = np.random.default_rng(0)
    base = {
        "observations": observations[:-1, None],
        "next_observations": observations[1:, None].copy(),
        "actions": rng.integers(0, 3, (steps, 1, 1)),
        "rewards": rng.normal(size=(steps, 1, 1)).astype(np.float32),
        "terminated": terminated,
        "truncated": np.zeros((steps, 1, 1), bool),
    }
    base.update(tensors)
    return Dataset(base, CircularState(0, 0, True), {"env_id": "CartPole-v1"})


def same_bits(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return bool(a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes())


def written(dataset: Dataset, folder: Path, storage: str) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_layout(dataset, folder, "minari", overwrite=True, format=storage)
    return [str(w.message) for w in caught]


@pytest.mark.parametrize("storage", STORAGES)
def test_box_round_trip_is_bit_for_bit_and_loads_in_minari(
    datasets_path: Path, storage: str
) -> None:
    observations = np.random.default_rng(1).normal(size=(9, 4)).astype(np.float32)
    observations[2, 0] = -0.0
    observations[3, 1] = np.frombuffer(np.uint32(0x7FC0_1234).tobytes(), np.float32)[0]  # NaN
    info = np.arange(8, dtype=np.int16).reshape(8, 1, 1)
    dataset = chain(observations, [2, 5], **{"infos/lives": info})
    folder = datasets_path / f"box{storage}-v0"
    assert written(dataset, folder, storage) == []  # nothing lost
    back = read_minari_folder(folder)
    assert set(back.tensors) == set(dataset.tensors)
    for name, array in dataset.tensors.items():
        assert same_bits(back.tensors[name], array), name
    assert back.metadata["env_id"] == "CartPole-v1" and LOSSES_KEY not in back.metadata
    loaded = minari.load_dataset(f"box{storage}-v0")
    episodes = list(loaded.iterate_episodes())
    assert [len(e.actions) for e in episodes] == [3, 3, 2]
    assert same_bits(episodes[1].observations, observations[3:7])
    assert np.array_equal(episodes[2].actions, dataset.tensors["actions"][6:, 0, 0])
    assert np.array_equal(episodes[0].infos["lives"], [0, 0, 1, 2])
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert files[:3] == ["README.md", "data/0/metadata.json", f"data/0/part-0.{storage}"]


@pytest.mark.parametrize("storage", STORAGES)
def test_dict_and_image_observations_load_in_minari_exactly(
    datasets_path: Path, storage: str
) -> None:
    rng = np.random.default_rng(2)
    frames = rng.integers(0, 256, (7, 32, 32, 3), dtype=np.uint8)
    position = rng.normal(size=(7, 2, 2))
    steps = 6
    tensors: dict[str, np.ndarray] = {
        "observations/frame": frames[:-1, None],
        "next_observations/frame": frames[1:, None],
        "observations/pos": position[:-1, None],
        "next_observations/pos": position[1:, None],
    }
    image = {"type": "Box", "low": 0, "high": 255, "shape": [32, 32, 3], "dtype": "uint8"}
    box = {"type": "Box", "low": -9.0, "high": 9.0, "shape": [2, 2], "dtype": "float64"}
    space = {"type": "Dict", "spaces": {"frame": image, "pos": box}}
    dataset = Dataset(
        {
            **tensors,
            "actions": rng.integers(0, 4, (steps, 1, 1)),
            "rewards": np.ones((steps, 1, 1), np.float32),
            "terminated": np.eye(1, steps, steps - 1, dtype=bool).reshape(steps, 1, 1),
            "truncated": np.zeros((steps, 1, 1), bool),
        },
        CircularState(0, 0, True),
        {"observation_space": space},
    )
    folder = datasets_path / f"pix{storage}-v0"
    written(dataset, folder, storage)
    [episode] = list(minari.load_dataset(f"pix{storage}-v0").iterate_episodes())
    assert same_bits(episode.observations["frame"], frames)  # raw, not JPEG
    assert same_bits(episode.observations["pos"], position)
    back = read_minari_folder(folder)
    for name, array in dataset.tensors.items():
        assert same_bits(back.tensors[name], array), name


@pytest.mark.parametrize("storage", STORAGES)
def test_reads_what_minari_writes(datasets_path: Path, storage: str) -> None:
    """``create_dataset_from_buffers`` writes through the storage ``DataCollector`` uses."""
    lengths = [3, 5]
    buffers = [
        EpisodeBuffer(
            observations={
                "n": np.arange(steps + 1) % 3,
                "pos": np.arange(4 * (steps + 1), dtype=np.float32).reshape(-1, 2, 2) + e,
            },
            actions=np.arange(steps) % 2,
            rewards=np.arange(steps, dtype=np.float64),
            terminations=np.eye(1, steps, steps - 1, dtype=bool)[0]
            if e == 0
            else np.zeros(steps, bool),
            truncations=np.zeros(steps, bool),
            infos={"k": np.arange(steps + 1) + 10 * e},
        )
        for e, steps in enumerate(lengths)
    ]
    space = gym.spaces.Dict(
        {"n": gym.spaces.Discrete(3), "pos": gym.spaces.Box(-99, 99, (2, 2), np.float32)}
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minari.create_dataset_from_buffers(
            f"toy/made{storage}-v0",
            buffers,
            env="CartPole-v1",
            observation_space=space,
            algorithm_name="random",
            data_format=storage,
        )
    folder = datasets_path / "toy" / f"made{storage}-v0"
    whole = load(folder)
    pos = np.concatenate([b.observations["pos"][:-1] for b in buffers])
    assert same_bits(whole.tensors["observations/pos"][:, 0], pos)
    nxt = np.concatenate([b.observations["pos"][1:] for b in buffers])
    assert same_bits(whole.tensors["next_observations/pos"][:, 0], nxt)
    assert whole.tensors["observations/n"][:, 0, 0].tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    assert whole.tensors["actions"][:, 0, 0].tolist() == [0, 1, 0, 0, 1, 0, 1, 0]
    assert whole.tensors["infos/k"][:, 0, 0].tolist() == [1, 2, 3, 11, 12, 13, 14, 15]
    assert np.flatnonzero(whole.tensors["terminated"]).tolist() == [2]
    assert whole.metadata["minari"]["data_format"] == storage
    lazy, close = open_lazy(folder)
    try:
        assert same_bits(lazy.tensors["rewards"][2:6], whole.tensors["rewards"][2:6])
        assert same_bits(lazy.tensors["observations/pos"].take(np.array([7, 0])), pos[[7, 0], None])
    finally:
        close()


@pytest.fixture(scope="module", params=STORAGES)
def dict_folder(request: Any, tmp_path_factory: Any) -> tuple[Path, Dataset]:
    """Dict observations (two leaves) and an info in episodes of 1 to 9 steps."""
    rng = np.random.default_rng(5)
    steps = 30
    position = rng.normal(size=(steps + 1, 3)).astype(np.float32)
    grid = rng.integers(0, 9, (steps + 1, 2, 2)).astype(np.uint8)
    dataset = chain(
        position,
        [0, 4, 13, 14, 20],
        **{
            "infos/lives": rng.integers(0, 5, (steps, 1, 1)).astype(np.int16),
            "observations/grid": grid[:-1, None],
            "next_observations/grid": grid[1:, None],
        },
    )
    for name in ("observations", "next_observations"):
        dataset.tensors[f"{name}/position"] = dataset.tensors.pop(name)
    folder = tmp_path_factory.mktemp("dict") / f"{request.param}-v0"
    written(dataset, folder, request.param)
    return folder, dataset


@settings(max_examples=25, deadline=None)
@given(
    kept=st.sampled_from([0, 200, 1 << 30]),
    reads=st.lists(
        st.tuples(
            st.sampled_from(
                ["observations/position", "next_observations/position", "observations/grid"]
                + ["next_observations/grid", "actions", "infos/lives"]
            ),
            st.integers(0, 29),
            st.integers(1, 12),
            st.booleans(),
        ),
        min_size=1,
        max_size=12,
    ),
)
def test_reads_in_any_order_give_the_written_rows(
    dict_folder: tuple[Path, Dataset], kept: int, reads: list[tuple[str, int, int, bool]]
) -> None:
    """Slices and gathers of the tensors that share a leaf (observations and next
    observations), in any order, whatever the decoded rows and mapped files kept."""
    from expcli.formats.layouts.minari import _columns as _minari_columns

    folder, dataset = dict_folder
    with (
        mock.patch.dict(_minari_columns._KEPT_BYTES, {"parquet": kept, "arrow": kept}),
        mock.patch.object(_minari_columns, "_MAPPED_BYTES", kept),
    ):
        lazy, close = open_lazy(folder)
        try:
            for name, start, count, gather in reads:
                expected, tensor = dataset.tensors[name], lazy.tensors[name]
                if gather:
                    rows = (np.arange(count) * 7 + start) % len(expected)
                    assert same_bits(tensor.take(rows), expected[rows]), name
                else:
                    assert same_bits(tensor[start : start + count], expected[start : start + count])
        finally:
            close()


def test_next_observations_that_are_not_the_next_rows_are_refused(tmp_path: Path) -> None:
    observations = np.arange(20, dtype=np.float32).reshape(5, 4)
    dataset = chain(observations, [])
    dataset.tensors["next_observations"][1, 0, 2] += 1
    with pytest.raises(SchemaError, match="row 1 of env column 0") as info:
        write_layout(dataset, tmp_path / "m-v0", "minari", overwrite=False, format="parquet")
    assert info.value.key == "next_observations" and "\n" not in str(info.value)
    assert not (tmp_path / "m-v0").exists()


def test_losses_are_named_in_the_metadata_and_one_warning(tmp_path: Path) -> None:
    observations = np.arange(8, dtype=np.float32).reshape(4, 2, 1)
    dataset = Dataset(
        {
            "observations": observations,
            "actions": np.zeros((4, 2, 1), np.int64),
            "rewards": np.zeros((4, 2, 1), np.float32),
            "log_prob": np.zeros((4, 2, 1)),
        },
        CircularState(0, 0, True),
    )
    [message] = written(dataset, tmp_path / "m-v0", "arrow")
    assert "2 env column(s)" in message and "log_prob" in message and "\n" not in message
    meta = json.loads((tmp_path / "m-v0" / "data" / "metadata.json").read_text())
    assert len(meta["expcli"][LOSSES_KEY]) == 4  # columns, log_prob, next obs, flags


def test_convert_picks_the_storage_with_to(tmp_path: Path) -> None:
    observations = np.arange(12, dtype=np.float32).reshape(6, 2)
    source = tmp_path / "run.npz"
    from expcli import save

    save(chain(observations, [1]), source)
    result = convert(source, tmp_path / "out-v0", layout="minari", to="parquet")
    assert result.dst_format == "parquet"
    assert (tmp_path / "out-v0" / "data" / "0" / "part-0.parquet").is_file()
    again = convert(tmp_path / "out-v0", tmp_path / "back.npz")
    assert again.src_format == "minari"
    for name, array in load(source).tensors.items():
        assert same_bits(load(tmp_path / "back.npz").tensors[name], array), name
    with pytest.raises(ConfigError, match="storage"):
        convert(source, tmp_path / "x", layout="minari", to="csv")


def test_damaged_episode_files_are_one_line_errors(tmp_path: Path) -> None:
    dataset = chain(np.arange(12, dtype=np.float32).reshape(6, 2), [1])
    write_layout(dataset, tmp_path / "m-v0", "minari", overwrite=False, format="parquet")
    part = tmp_path / "m-v0" / "data" / "1" / "part-0.parquet"
    part.write_bytes(part.read_bytes()[:-9] + b"PAR1")
    with pytest.raises(FormatError) as info:
        read_minari_folder(tmp_path / "m-v0")
    assert "1" in str(info.value.path) and "\n" not in str(info.value)
    (tmp_path / "m-v0" / "data" / "1" / "stray.bin").write_bytes(b"x")
    with pytest.raises(FormatError, match="2 data files"):
        read_minari_folder(tmp_path / "m-v0")


# DataCollector.close removes its temporary folder by hand, so the TemporaryDirectory object
# warns that it cleans up implicitly when collected (minari 0.5.4's, not expcli's).
@pytest.mark.filterwarnings("ignore:Implicitly cleaning up:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("storage", STORAGES)
def test_reads_what_minaris_data_collector_records_as_minari_reads_it(
    datasets_path: Path, storage: str
) -> None:
    """A CartPole run recorded by ``DataCollector``: expcli's tensors equal what
    ``minari.load_dataset`` gives, episode by episode (the last one cut short, truncated)."""
    pytest.importorskip("jax")  # DataCollector's episode buffers need it (minari[create])
    env = minari.DataCollector(gym.make("CartPole-v1", max_episode_steps=12), data_format=storage)
    rng = np.random.default_rng(0)
    env.reset(seed=3)
    for _ in range(40):
        _, _, terminated, truncated, _ = env.step(int(rng.integers(2)))
        if terminated or truncated:
            env.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = env.create_dataset(f"toy/collected{storage}-v0", algorithm_name="random")
    env.close()
    whole = load(datasets_path / "toy" / f"collected{storage}-v0")
    assert whole.metadata["minari"]["data_format"] == storage
    at, episodes = 0, list(minari.load_dataset(made.spec.dataset_id).iterate_episodes())
    assert len(episodes) >= 3 and any(e.truncations[-1] for e in episodes)
    for episode in episodes:
        steps = len(episode.actions)
        rows = slice(at, at + steps)
        assert same_bits(whole.tensors["observations"][rows, 0], episode.observations[:-1])
        assert same_bits(whole.tensors["next_observations"][rows, 0], episode.observations[1:])
        assert whole.tensors["actions"][rows, 0].reshape(-1).tolist() == episode.actions.tolist()
        assert same_bits(whole.tensors["rewards"][rows, 0].reshape(-1), episode.rewards)
        assert np.array_equal(whole.tensors["terminated"][rows, 0, 0], episode.terminations)
        assert np.array_equal(whole.tensors["truncated"][rows, 0, 0], episode.truncations)
        at += steps
    assert at == len(whole.tensors["actions"]) == made.total_steps
