"""Minari ids: a folder's path under Minari's datasets root; and author, algorithm, code.

Checked with the real ``minari``: what expcli writes under ``MINARI_DATASETS_PATH`` is
listed by ``minari.list_local_datasets()`` and loaded by ``minari.load_dataset(id)`` with
expcli's values, and the descriptive fields come back in its metadata.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from expcli import convert, save
from expcli.cli.app import app
from expcli.errors import ConfigError
from expcli.formats import Dataset
from expcli.formats.authorship import Authorship
from expcli.formats.layouts import write_layout
from expcli.formats.layouts.minari.layout import dataset_id
from expcli.spec import CircularState
from tests.format_catalogue import LAYOUT_FOLDERS

minari = pytest.importorskip("minari")
pytest.importorskip("pyarrow")
parse_dataset_id = pytest.importorskip("minari.dataset.minari_dataset").parse_dataset_id

ENDS = {"terminated": 2, "truncated": 6}
"""The two episodes: rows 0-2 (terminated), 3-6 (truncated)."""


def chain() -> Dataset:
    """One env column of 7 steps whose next observations are the next rows (Minari's form)."""
    rng = np.random.default_rng(39)
    observations = rng.normal(size=(8, 3)).astype(np.float32)
    flags = {name: np.zeros((7, 1, 1), bool) for name in ENDS}
    for name, row in ENDS.items():
        flags[name][row] = True
    tensors = {
        "observations": observations[:-1, None],
        "next_observations": observations[1:, None].copy(),
        "actions": rng.integers(0, 2, (7, 1, 1)),
        "rewards": rng.normal(size=(7, 1, 1)).astype(np.float32),
        **flags,
    }
    collector = {"policy": {"kind": "callable", "spec": "my_pkg.agents:act"}}
    return Dataset(
        tensors, CircularState(0, 0, True), {"env_id": "CartPole-v1", "collector": collector}
    )


def cli(*args: str) -> object:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})


def assert_loads_as(dataset_id: str, dataset: Dataset) -> None:
    """``minari.load_dataset(dataset_id)`` gives ``dataset``'s episodes, value for value."""
    loaded = minari.load_dataset(dataset_id)
    assert loaded.spec.dataset_id == dataset_id
    tensors = {name: np.asarray(array)[:, 0] for name, array in dataset.tensors.items()}
    bounds = [(0, 3), (3, 7)]
    episodes = list(loaded.iterate_episodes())
    assert len(episodes) == len(bounds)
    for episode, (start, stop) in zip(episodes, bounds, strict=True):
        final = tensors["next_observations"][stop - 1 : stop]
        observations = np.concatenate([tensors["observations"][start:stop], final])
        assert episode.observations.tobytes() == observations.tobytes()
        assert np.array_equal(episode.actions, tensors["actions"][start:stop, 0])
        assert episode.rewards.tobytes() == tensors["rewards"][start:stop, 0].tobytes()
        assert np.array_equal(episode.terminations, tensors["terminated"][start:stop, 0])
        assert np.array_equal(episode.truncations, tensors["truncated"][start:stop, 0])


def test_plain_and_namespaced_targets_are_listed_and_load_with_expclis_values(
    datasets_path: Path, tmp_path: Path
) -> None:
    source = save(chain(), tmp_path / "run.npz")
    plain = cli("convert", str(source), str(datasets_path / "cp-v0"), "--layout", "minari")
    assert plain.exit_code == 0, plain.output
    described = cli(
        "convert", str(source), str(datasets_path / "myns" / "cp-v1"), "--layout", "minari",
        "--storage", "parquet", "--author", "Ada L.", "--author", "Bo", "--author-email",
        "ada@example.org", "--algorithm-name", "ppo", "--code-permalink", "https://x.org/c",
    )  # fmt: skip
    assert described.exit_code == 0, described.output
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a misconfigured dataset is a warning in Minari
        listed = minari.list_local_datasets()
    assert sorted(listed) == ["cp-v0", "myns/cp-v1"]
    assert listed["myns/cp-v1"]["dataset_id"] == "myns/cp-v1"
    for name in listed:
        assert_loads_as(name, chain())
    metadata = minari.load_dataset("myns/cp-v1").storage.metadata
    assert metadata["author"] == {"Ada L.", "Bo"}
    assert metadata["author_email"] == {"ada@example.org"}
    assert metadata["algorithm_name"] == "ppo"
    assert metadata["code_permalink"] == "https://x.org/c"
    plain_metadata = minari.load_dataset("cp-v0").storage.metadata
    assert "author" not in plain_metadata
    assert plain_metadata["algorithm_name"] == "my_pkg.agents:act"  # the recorded policy's


def test_the_python_api_takes_an_authorship_in_every_storage(datasets_path: Path) -> None:
    given = Authorship(("Ada",), ("a@b.c",), "sac", "https://x.org")
    storages = [storage for layout, storage in LAYOUT_FOLDERS if layout == "minari"]
    for number, storage in enumerate(storages):
        target = datasets_path / "deep" / "ns" / f"cp-v{number}"
        target.parent.mkdir(parents=True, exist_ok=True)  # write_layout makes no folders
        write_layout(chain(), target, "minari", overwrite=False, format=storage, authorship=given)
        metadata = minari.load_dataset(f"deep/ns/cp-v{number}").storage.metadata
        assert metadata["author"] == {"Ada"} and metadata["algorithm_name"] == "sac", storage
    ids = [f"deep/ns/cp-v{number}" for number in range(len(storages))]
    assert sorted(minari.list_local_datasets()) == ids


def test_a_folder_named_without_a_version_is_refused_in_one_line(
    datasets_path: Path, tmp_path: Path
) -> None:
    source = save(chain(), tmp_path / "run.npz")
    for target, hint in (
        (datasets_path / "plainname", "plainname-v0"),
        (datasets_path / "my.ns" / "cp-v1", "my_ns/cp-v1"),
        (tmp_path / "elsewhere" / "plain", "plain-v0"),
    ):
        refused = cli("convert", str(source), str(target), "--layout", "minari")
        assert refused.exit_code == 2, refused.output
        [line] = refused.stderr.splitlines()
        assert line.startswith("error: ") and "NAME-vVERSION" in line and hint in line, line
        assert not target.exists()
    assert minari.list_local_datasets() == {}  # the root still lists
    # why: Minari parses each folder path under its root as an id, and fails the whole
    # listing on one without -vN, before it reads any metadata.json
    (datasets_path / "plainname" / "data").mkdir(parents=True)
    with pytest.raises(TypeError):
        minari.list_local_datasets()


_ID = r"(?:[-_a-zA-Z0-9]{1,6}(?:/[-_a-zA-Z0-9]{1,6}){0,2}/)?[-_a-zA-Z0-9]{1,8}-v[0-9]{1,3}"


@settings(max_examples=50)
@given(st.from_regex(_ID, fullmatch=True).filter(lambda s: re.search(r"^[^/]/", s) is None))
def test_an_id_is_the_folders_path_under_the_root_as_minari_parses_it(wanted: str) -> None:
    root = Path("/nowhere/minari-root")
    with mock.patch.dict(os.environ, {"MINARI_DATASETS_PATH": str(root)}):
        got = dataset_id(root / wanted)
    assert got == wanted
    head, _, number = got.rpartition("-v")
    namespace, _, name = head.rpartition("/")
    assert parse_dataset_id(got) == (namespace or None, name, int(number))


@settings(max_examples=50)
@given(st.from_regex(r"[-_a-zA-Z0-9.]{1,12}", fullmatch=True))
def test_a_name_without_a_version_is_refused_anywhere(name: str) -> None:
    if re.fullmatch(r"[-_a-zA-Z0-9]+?-v\d+", name):
        return
    root = Path("/nowhere/minari-root")
    with mock.patch.dict(os.environ, {"MINARI_DATASETS_PATH": str(root)}):
        for folder in (root / name, Path("/elsewhere") / name):
            with pytest.raises(ConfigError, match="NAME-vVERSION"):
                dataset_id(folder)


def test_outside_the_root_the_id_is_the_folders_name(datasets_path: Path, tmp_path: Path) -> None:
    outside = write_layout(chain(), tmp_path / "away-v3", "minari", overwrite=False)
    assert minari.MinariDataset(outside / "data").spec.dataset_id == "away-v3"


def test_collect_names_its_policy_as_the_algorithm(datasets_path: Path) -> None:
    target = datasets_path / "runs" / "cartpole-v0"
    done = cli(
        "collect", "CartPole-v1", "--mode", "dummy", "--steps", "12", "--seed", "1",
        "--layout", "minari", "-o", str(target), "--author", "Ada", "-q",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    loaded = minari.load_dataset("runs/cartpole-v0")
    assert loaded.storage.metadata["algorithm_name"] == "random"  # --policy's default
    assert loaded.storage.metadata["author"] == {"Ada"}
    assert loaded.total_steps == 12


def test_the_fields_with_another_layout_are_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    source = save(chain(), tmp_path / "run.npz")
    for args in (
        ["convert", str(source), str(tmp_path / "out.npz"), "--author", "Ada"],
        ["convert", str(source), str(tmp_path / "lr"), "--layout", "lerobot", "--author", "A"],
        ["convert", str(source), "-", "--to", "npz", "--code-permalink", "https://x.org"],
        ["collect", "CartPole-v1", "--steps", "5", "-o", str(tmp_path / "c.npz"),
         "--algorithm-name", "ppo"],
    ):  # fmt: skip
        refused = cli(*args)
        assert refused.exit_code == 2, refused.output
        assert "minari" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.npz"]
    with pytest.raises(ConfigError, match="--layout minari"):
        convert(source, tmp_path / "out.h5", authorship=Authorship(authors=("Ada",)))
