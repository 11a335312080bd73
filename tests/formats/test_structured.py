"""Dict and Tuple data through every format and through Minari, with the real minari.

A dataset of a structured space holds one tensor per leaf and the space in its metadata;
``Dataset.structured`` gives the nesting back. Minari stores the same leaves as groups
(Tuple parts ``_index_<i>``): a file expcli writes loads in minari with the right nested
structure, and a Minari dataset of Dict observations reads into expcli's leaf tensors.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli import ParallelEnv, RandomMemory, load, save
from expcli.collect import Collector
from expcli.collect.spaces import space_record
from expcli.formats import Dataset
from expcli.formats.layouts import write_layout
from expcli.formats.layouts.minari.layout import read_folder as read_minari_folder
from expcli.spec import CircularState
from tests.collect.structured_envs import ARM, PHASE, TEXT
from tests.format_catalogue import SUFFIXES
from tests.formats.test_roundtrip import arrays

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")

minari = pytest.importorskip("minari")
EpisodeBuffer = pytest.importorskip("minari.data_collector").EpisodeBuffer


def collected(env_id: str, n: int = 2, steps: int = 15, seed: int = 0) -> Dataset:
    """A real collection of ``env_id`` (random actions), as a dataset."""
    memory = RandomMemory(steps, n, device="cpu")
    with ParallelEnv.from_id(env_id, n, asynchronous="restart") as env:
        Collector(env, memory, seed=seed).collect(steps=steps * n)
    return memory.to_dataset()


@pytest.fixture(scope="module")
def phase() -> Dataset:
    return collected(f"tests.collect.structured_envs:{PHASE}")


@pytest.fixture(scope="module")
def arm() -> Dataset:
    return collected(f"tests.collect.structured_envs:{ARM}", n=3)


@pytest.fixture(scope="module")
def blackjack() -> Dataset:
    return collected("Blackjack-v1", steps=20)


@pytest.fixture(scope="module")
def text() -> Dataset:
    return collected(f"tests.collect.structured_envs:{TEXT}", steps=8)


@st.composite
def structured_datasets(draw: st.DrawFn) -> Dataset:
    """Dict (of a Tuple) observation spaces with leaves of every dtype the schema has."""
    from gymnasium import spaces

    size, n = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    leaves = {
        "pos": spaces.Box(-1.0, 1.0, (draw(st.integers(1, 3)),), np.float32),
        "wide": spaces.Box(-np.inf, np.inf, (2, 2), np.float64),
        "phase": spaces.Discrete(4),
        "bits": spaces.MultiBinary(3),
        "pair": spaces.Tuple((spaces.Discrete(2), spaces.Box(0, 255, (2,), np.uint8))),
    }
    keys = draw(st.lists(st.sampled_from(sorted(leaves)), min_size=1, unique=True))
    space = spaces.Dict({k: leaves[k] for k in keys})
    from expcli.collect.spaces import layout_of

    tensors = {}
    for leaf in layout_of(space, "observations").leaves:
        for prefix in ("observations", "next_observations"):
            shape = (size, n, *leaf.shape)
            tensors[prefix + leaf.suffix] = draw(arrays(leaf.dtype.name, shape))
    tensors["rewards"] = draw(arrays("float32", (size, n, 1)))
    state = CircularState(draw(st.integers(0, size - 1)), 0, draw(st.booleans()))
    return Dataset(tensors, state, {"observation_space": space_record(space)})


def assert_same_structure(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            assert_same_structure(a[key], b[key])
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same_structure(x, y)
    else:
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


@settings(max_examples=25, deadline=None)
@given(dataset=structured_datasets(), suffix=st.sampled_from(SUFFIXES))
def test_leaves_round_trip_every_format_with_their_structure(dataset: Dataset, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        back = load(save(dataset, Path(folder) / f"d{suffix}"))
    assert back.tensors.keys() == dataset.tensors.keys()
    assert back.metadata["observation_space"] == dataset.metadata["observation_space"]
    for prefix in ("observations", "next_observations"):
        assert_same_structure(back.structured(prefix), dataset.structured(prefix))


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_collected_leaves_round_trip(
    phase: Dataset, text: Dataset, suffix: str, tmp_path: Path
) -> None:
    for dataset in (phase, text):
        back = load(save(dataset, tmp_path / f"d{suffix}", overwrite=True))
        for prefix in ("observations", "next_observations", "actions"):
            assert_same_structure(back.structured(prefix), dataset.structured(prefix))
    words = text.structured("observations")["word"]
    assert words.dtype.kind == "U" and words.shape == (8, 2) and words[0, 0] == "a"


def test_structured_without_a_space_nests_by_name() -> None:
    tensors = {
        "observations/a": np.zeros((2, 1, 1)),
        "observations/b/c": np.ones((2, 1, 3)),
        "infos/lives": np.ones((2, 1, 1)),
    }
    dataset = Dataset(tensors)
    nested = dataset.structured("observations")
    assert (
        nested["a"] is tensors["observations/a"] and nested["b"]["c"] is tensors["observations/b/c"]
    )
    assert dataset.structured("infos") == {"lives": tensors["infos/lives"]}
    from expcli.errors import SchemaError

    with pytest.raises(SchemaError, match="'actions'"):
        dataset.structured("actions")


def minari_episodes(folder: Path) -> tuple[Any, list[Any]]:
    loaded = minari.MinariDataset(folder / "data")
    return loaded, list(loaded.iterate_episodes())


def test_dict_observations_load_in_minari_nested(phase: Dataset, tmp_path: Path) -> None:
    write_layout(phase, tmp_path / "phase-v0", "minari", overwrite=False)
    loaded, episodes = minari_episodes(tmp_path / "phase-v0")
    assert loaded.observation_space == gym.make(PHASE).observation_space
    assert loaded.action_space == gym.make(PHASE).action_space
    assert loaded.total_steps == len(phase)
    first = episodes[0]
    assert set(first.observations) == {"pos", "phase"}
    steps = len(first.actions)
    obs, following = phase.structured("observations"), phase.structured("next_observations")
    pos = np.concatenate([obs["pos"][:steps, 0], following["pos"][steps - 1 : steps, 0]])
    phases = np.concatenate(
        [obs["phase"][:steps, 0, 0], following["phase"][steps - 1 : steps, 0, 0]]
    )
    assert first.observations["pos"].dtype == np.float32
    np.testing.assert_array_equal(first.observations["pos"], pos)
    np.testing.assert_array_equal(first.observations["phase"], phases)
    assert all(loaded.observation_space.contains(_sample(e.observations, 0)) for e in episodes)
    back = read_minari_folder(tmp_path / "phase-v0")
    assert back.structured("observations")["pos"].dtype == np.float32
    assert back.tensors["observations/phase"].shape[2:] == (1,)


def _sample(observations: Any, k: int) -> Any:
    if isinstance(observations, dict):
        return {key: _sample(value, k) for key, value in observations.items()}
    if isinstance(observations, tuple):
        return tuple(_sample(value, k) for value in observations)
    return observations[k]


def test_tuple_observations_and_dict_actions_load_in_minari(
    blackjack: Dataset, arm: Dataset, tmp_path: Path
) -> None:
    write_layout(blackjack, tmp_path / "bj-v0", "minari", overwrite=False)
    loaded, episodes = minari_episodes(tmp_path / "bj-v0")
    assert loaded.observation_space == gym.make("Blackjack-v1").observation_space
    assert isinstance(episodes[0].observations, tuple) and len(episodes[0].observations) == 3
    steps = len(episodes[0].actions)
    np.testing.assert_array_equal(
        episodes[0].observations[0][:steps], blackjack.tensors["observations/0"][:steps, 0, 0]
    )
    write_layout(arm, tmp_path / "arm-v0", "minari", overwrite=False)
    loaded, episodes = minari_episodes(tmp_path / "arm-v0")
    assert loaded.action_space == gym.make(ARM).action_space
    actions = episodes[0].actions
    assert set(actions) == {"move", "force"} and actions["force"].dtype == np.float32
    steps = len(actions["move"])
    np.testing.assert_array_equal(actions["move"], arm.tensors["actions/move"][:steps, 0, 0])
    np.testing.assert_array_equal(actions["force"], arm.tensors["actions/force"][:steps, 0])
    for dataset, name in ((blackjack, "bj-v0"), (arm, "arm-v0")):
        back = read_minari_folder(tmp_path / name)
        for key in dataset.tensors:
            if key.startswith(("observations", "next_observations", "actions")):
                np.testing.assert_array_equal(
                    back.tensors[key][: len(back), 0], _column_major(dataset.tensors[key]), key
                )


def _column_major(array: np.ndarray) -> np.ndarray:
    """Every valid row, env column by env column (as the episode-wise layouts lay them)."""
    return np.concatenate([array[:, j] for j in range(array.shape[1])])


def test_text_leaves_are_strings_in_minari(text: Dataset, tmp_path: Path) -> None:
    write_layout(text, tmp_path / "text-v0", "minari", overwrite=False)
    loaded, episodes = minari_episodes(tmp_path / "text-v0")
    words = episodes[0].observations["word"]
    steps = len(episodes[0].actions)
    assert words[:steps] == text.structured("observations")["word"][:steps, 0].tolist()
    back = read_minari_folder(tmp_path / "text-v0")
    np.testing.assert_array_equal(
        back.tensors["observations/word"][:, 0], _column_major(text.tensors["observations/word"])
    )


def test_a_minari_dataset_of_dict_observations_reads_into_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    space = gym.make(PHASE).observation_space
    rng = np.random.default_rng(0)
    buffers = []
    for steps in (3, 2):
        obs = {
            "pos": rng.uniform(-1, 1, (steps + 1, 2)).astype(np.float32),
            "phase": rng.integers(1, 5, steps + 1),
        }
        buffers.append(
            EpisodeBuffer(
                observations=obs,
                actions=rng.integers(0, 3, steps),
                rewards=rng.normal(size=steps),
                terminations=np.arange(steps) == steps - 1,
                truncations=np.zeros(steps, bool),
            )
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minari.create_dataset_from_buffers(
            "toy/phase-v0",
            buffers,
            observation_space=space,
            action_space=gym.make(PHASE).action_space,
            algorithm_name="random",
        )
    dataset = read_minari_folder(tmp_path / "toy" / "phase-v0")
    nested = dataset.structured("observations")
    assert set(nested) == {"pos", "phase"}
    expected = np.concatenate([b.observations["pos"][:-1] for b in buffers])
    np.testing.assert_array_equal(nested["pos"][:, 0], expected)
    following = np.concatenate([b.observations["phase"][1:] for b in buffers])
    np.testing.assert_array_equal(dataset.tensors["next_observations/phase"][:, 0, 0], following)
    assert dataset.tensors["observations/phase"].dtype == np.int64


@pytest.mark.parametrize("env_id", [ARM, TEXT])
def test_a_minari_folder_read_lazily_equals_read_whole(env_id: str, tmp_path: Path) -> None:
    from expcli.formats import open_lazy
    from tests.formats.layouts.test_lazy_layouts import assert_same

    folder = tmp_path / "lazy-v0"
    write_layout(
        collected(f"tests.collect.structured_envs:{env_id}"), folder, "minari", overwrite=False
    )
    lazy, close = open_lazy(folder)
    try:
        assert_same(read_minari_folder(folder), lazy)
    finally:
        close()
