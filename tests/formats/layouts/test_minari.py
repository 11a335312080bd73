"""Minari datasets made with Minari itself, and folders Minari loads."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from expcli.errors import ConfigError, FormatError, OutputExistsError, SchemaError
from expcli.formats import Dataset
from expcli.formats.layouts import SEAMS_KEY, read_foreign_hdf5, write_layout
from expcli.formats.layouts.minari import layout as minari_layout
from expcli.formats.layouts.minari.layout import is_minari_folder
from expcli.formats.layouts.minari.layout import read_folder as read_minari_folder
from expcli.spec import CircularState
from tests.formats.layouts.sample import EPISODES

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")

minari = pytest.importorskip("minari")
EpisodeBuffer = pytest.importorskip("minari.data_collector").EpisodeBuffer

LENGTHS = [3, 4, 2]
# episode 0 terminates, episode 1 ends with neither flag (a seam), episode 2 is truncated
TERMINATIONS = [[False, False, True], [False] * 4, [False, False]]
TRUNCATIONS = [[False] * 3, [False] * 4, [False, True]]


def observations(episode: int, steps: int) -> np.ndarray:
    """Episode ``e``'s observation ``k`` is ``[e, k, e * 10 + k, -k]``."""
    k = np.arange(steps + 1)
    return np.stack([np.full_like(k, episode), k, episode * 10 + k, -k], axis=1).astype(np.float32)


@pytest.fixture
def made(datasets_path: Path) -> Path:
    """A dataset made with ``minari.create_dataset_from_buffers``; its folder."""
    buffers = [
        EpisodeBuffer(
            observations=observations(e, steps),
            actions=np.arange(steps) % 2,
            rewards=np.arange(steps, dtype=np.float64) + e,
            terminations=np.array(TERMINATIONS[e]),
            truncations=np.array(TRUNCATIONS[e]),
            infos={"step": np.arange(steps + 1) + 100 * e},
        )
        for e, steps in enumerate(LENGTHS)
    ]
    with warnings.catch_warnings():  # Minari asks for an author, a description, ...
        warnings.simplefilter("ignore")
        minari.create_dataset_from_buffers(
            "toy/cartpole-v0", buffers, env="CartPole-v1", algorithm_name="random"
        )
    return datasets_path / "toy" / "cartpole-v0"


def check_made(dataset: Dataset) -> None:
    tensors = dataset.tensors
    total = sum(LENGTHS)
    assert (dataset.memory_size, dataset.num_envs) == (total, 1)
    assert dataset.state == CircularState(0, 0, True)
    obs = [observations(e, steps) for e, steps in enumerate(LENGTHS)]
    assert np.array_equal(tensors["observations"][:, 0], np.concatenate([o[:-1] for o in obs]))
    assert np.array_equal(tensors["next_observations"][:, 0], np.concatenate([o[1:] for o in obs]))
    assert tensors["actions"][:, 0, 0].tolist() == [0, 1, 0, 0, 1, 0, 1, 0, 1]
    assert tensors["rewards"][:, 0, 0].tolist() == [0, 1, 2, 1, 2, 3, 4, 2, 3]
    assert np.flatnonzero(tensors["terminated"]).tolist() == [2]
    # episode 1 ends with neither flag: marked truncated so that it stays apart
    assert np.flatnonzero(tensors["truncated"]).tolist() == [6, 8]
    assert dataset.metadata[SEAMS_KEY] == [6]
    # a step's info is the one after it (the reset info dropped)
    assert tensors["infos/step"][:, 0, 0].tolist() == [1, 2, 3, 101, 102, 103, 104, 201, 202]
    assert dataset.metadata["layout"] == "minari"
    assert dataset.metadata["env_id"] == "CartPole-v1"
    assert dataset.metadata["action_space"] == {
        "type": "Discrete",
        "dtype": "int64",
        "start": 0,
        "n": 2,
    }
    assert dataset.metadata["observation_space"]["shape"] == [4]
    assert dataset.metadata["minari"]["dataset_id"] == "toy/cartpole-v0"


def test_reads_a_minari_folder(made: Path) -> None:
    assert is_minari_folder(made) and is_minari_folder(made / "data")
    check_made(read_minari_folder(made))
    check_made(read_minari_folder(made / "data"))


def test_reads_main_data_hdf5_by_its_structure(made: Path, tmp_path: Path) -> None:
    path = made / "data" / "main_data.hdf5"
    with h5py.File(path, "r") as h5:
        dataset = read_foreign_hdf5(h5, path, None)
    assert dataset is not None
    check_made(dataset)
    alone = tmp_path / "episodes.h5"  # without metadata.json beside it: data only
    shutil.copy(path, alone)
    with h5py.File(alone, "r") as h5:
        dataset = read_foreign_hdf5(h5, alone, None)
    assert dataset is not None
    assert dataset.memory_size == sum(LENGTHS) and "env_id" not in dataset.metadata


def test_observations_not_one_longer_than_actions_are_named(made: Path) -> None:
    with h5py.File(made / "data" / "main_data.hdf5", "a") as h5:
        h5["episode_1/observations"].resize((4, 4))
    with pytest.raises(SchemaError) as info:
        read_minari_folder(made)
    assert info.value.key == "episode_1/observations"
    assert "4 rows for 4 actions; expected 5" in str(info.value)


def test_episode_without_rewards_is_named(made: Path) -> None:
    with h5py.File(made / "data" / "main_data.hdf5", "a") as h5:
        del h5["episode_2/rewards"]
    with pytest.raises(FormatError) as info:
        read_minari_folder(made)
    assert info.value.key == "episode_2/rewards"


def test_other_storages_and_jpeg_images_are_refused(made: Path) -> None:
    meta_path = made / "data" / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "data_format": "zarr"}))
    with pytest.raises(FormatError, match="zarr"):
        read_minari_folder(made)
    image = {"type": "Box", "dtype": "uint8", "shape": [32, 32, 3]}
    image.update(low=np.zeros((32, 32, 3), int).tolist(), high=np.full((32, 32, 3), 255).tolist())
    meta_path.write_text(json.dumps({**meta, "observation_space": json.dumps(image)}))
    with pytest.raises(FormatError, match="JPEG") as info:
        read_minari_folder(made)
    assert info.value.key == "episode_0/observations"


def test_not_a_minari_folder(tmp_path: Path) -> None:
    assert not is_minari_folder(tmp_path)
    with pytest.raises(FormatError):
        read_minari_folder(tmp_path)


def written_episodes(loaded: Any) -> list[Any]:
    return list(loaded.iterate_episodes())


def test_written_folder_loads_in_minari(
    dataset: Dataset, datasets_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = write_layout(dataset, datasets_path / "mine-v0", "minari", overwrite=False)
    loaded = minari.load_dataset("mine-v0")
    assert loaded.total_episodes == 6 and loaded.total_steps == 12
    assert loaded.action_space == minari.serialization.deserialize_space(
        '{"type": "Discrete", "dtype": "int64", "start": 0, "n": 12}'
    )
    episodes = written_episodes(loaded)
    expected = [(j, rows) for j in range(2) for rows in EPISODES[j]]
    for episode, (j, rows) in zip(episodes, expected, strict=True):
        obs = dataset.tensors["observations"][rows, j]
        final = dataset.tensors["next_observations"][rows[-1], j]
        assert np.array_equal(episode.observations, np.concatenate([obs, final[None]]))
        assert np.array_equal(episode.actions, dataset.tensors["actions"][rows, j, 0])
        assert np.array_equal(episode.rewards, dataset.tensors["rewards"][rows, j, 0])
        assert np.array_equal(episode.terminations, dataset.tensors["terminated"][rows, j, 0])
        assert np.array_equal(episode.truncations, dataset.tensors["truncated"][rows, j, 0])
        lives = dataset.tensors["infos/lives"][rows, j, 0]
        assert np.array_equal(episode.infos["lives"], np.concatenate([lives[:1], lives]))
        log_prob = dataset.tensors["log_prob"][rows, j, 0]
        assert np.array_equal(episode.infos["log_prob"][1:], log_prob)
    meta = json.loads((target / "data" / "metadata.json").read_text())
    assert len(meta["expcli"].pop("lost_in_layout")) == 2  # the env columns, log_prob's name
    assert meta["expcli"] == {"env_id": "Toy-v0", "seed": 3}
    assert meta["jpeg_encoding"] is False


def test_minari_folder_round_trip(made: Path, tmp_path: Path) -> None:
    dataset = read_minari_folder(made)
    (tmp_path / "toy").mkdir()
    write_layout(dataset, tmp_path / "toy" / "cartpole-v0", "minari", overwrite=False)
    write_layout(dataset, tmp_path / "again-v0", "minari", overwrite=False)
    back = read_minari_folder(tmp_path / "again-v0")
    for name, array in dataset.tensors.items():
        assert np.array_equal(back.tensors[name], array), name
    assert back.metadata["env_id"] == "CartPole-v1"
    assert back.metadata["observation_space"] == dataset.metadata["observation_space"]
    loaded = minari.MinariDataset(tmp_path / "again-v0" / "data")
    assert loaded.spec.env_spec is not None and loaded.spec.env_spec.id == "CartPole-v1"
    assert loaded.spec.dataset_id == "again-v0"  # outside the datasets root: the folder's name
    # ... or the id it had, where the folder's path ends with it (its namespace kept)
    kept = minari.MinariDataset(tmp_path / "toy" / "cartpole-v0" / "data")
    assert kept.spec.dataset_id == "toy/cartpole-v0"
    assert kept.storage.metadata["algorithm_name"] == "random"  # Minari's own, kept


def test_overwrite_rules(dataset: Dataset, tmp_path: Path, made: Path) -> None:
    with pytest.raises(OutputExistsError):
        write_layout(dataset, made, "minari", overwrite=False)
    write_layout(dataset, made, "minari", overwrite=True)
    assert read_minari_folder(made).memory_size == 12
    other = tmp_path / "other-v0"
    other.mkdir()
    (other / "keep-v0").write_text("mine")
    with pytest.raises(ConfigError, match="not a dataset"):
        write_layout(dataset, other, "minari", overwrite=True)
    assert (other / "keep-v0").read_text() == "mine"
    with pytest.raises(ConfigError, match="is a file"):
        write_layout(dataset, other / "keep-v0", "minari", overwrite=True)
    empty = tmp_path / "empty-v0"
    empty.mkdir()
    write_layout(dataset, empty, "minari", overwrite=True)
    assert is_minari_folder(empty)


def test_failed_write_leaves_the_target_and_no_temporary_folder(
    dataset: Dataset, made: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = read_minari_folder(made)

    def fail(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(minari_layout, "minari_metadata", fail)
    with pytest.raises(KeyboardInterrupt):
        write_layout(dataset, made, "minari", overwrite=True)
    assert not [p.name for p in made.parent.iterdir() if p.name.startswith(".")]
    assert read_minari_folder(made).memory_size == before.memory_size


def test_observation_widths_that_differ_are_refused_before_writing(tmp_path: Path) -> None:
    dataset = Dataset(
        {
            "observations": np.zeros((4, 1, 4), np.float32),
            "next_observations": np.zeros((4, 1, 3), np.float32),
            "actions": np.zeros((4, 1, 1), np.int64),
            "rewards": np.zeros((4, 1, 1), np.float32),
        }
    )
    with pytest.raises(SchemaError, match="feature shape") as info:
        write_layout(dataset, tmp_path / "m-v0", "minari", overwrite=False)
    assert info.value.key == "next_observations" and not (tmp_path / "m-v0").exists()


def test_read_lazily_equals_read_whole(made: Path) -> None:
    from expcli.formats import open_lazy
    from expcli.formats.lazy import LazyRows
    from tests.formats.layouts.test_lazy_layouts import assert_same

    lazy, close = open_lazy(made)
    try:
        for name, tensor in lazy.tensors.items():
            flag = name in ("terminated", "truncated")  # a byte a step: read at once
            assert isinstance(tensor, LazyRows) != flag, name
        assert_same(read_minari_folder(made), lazy)
    finally:
        close()
