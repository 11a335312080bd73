"""Reading what a file does not record (``--num-envs``) and writing only what a layout can be
(issue 12): a skrl-layout CSV has no env count; a layout's file has the layout's suffix."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from expcli import load
from expcli.formats import Dataset, write_dataset
from expcli.spec import CircularState
from tests.memory_probe import run_child

ENVS = 3


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """Three envs whose episodes last 2, 3 and 4 steps."""
    rows = 12
    done = np.zeros((rows, ENVS, 1), bool)
    for env in range(ENVS):
        done[env + 1 :: env + 2, env] = True
    rng = np.random.default_rng(0)
    dataset = Dataset(
        {
            "observations": rng.normal(size=(rows, ENVS, 2)).astype(np.float32),
            "actions": rng.integers(0, 3, size=(rows, ENVS, 1)),
            "rewards": np.ones((rows, ENVS, 1), np.float32),
            "terminated": done,
        },
        CircularState(0, 0, True),
    )
    return write_dataset(dataset, tmp_path / "ant.npz")


def expcli(*args: str) -> tuple[int | None, str, list[str]]:
    run = run_child(["-m", "expcli", *args])
    return run.returncode, run.stdout, run.lines


def episodes(out: str) -> dict[str, object]:
    data = json.loads(out)
    return {"num_envs": data["num_envs"], "length": data["episodes"]["length"]}


def test_a_skrl_csv_is_read_with_num_envs_and_without_it_a_warning(
    source: Path, tmp_path: Path
) -> None:
    skrl = tmp_path / "sk.csv"
    code, _, _ = expcli("convert", str(source), str(skrl), "--layout", "skrl")
    assert code == 0 and not skrl.with_name("sk.csv.meta.json").exists()
    code, expected, _ = expcli("inspect", str(source), "--json")
    code, guessed, warning = expcli("inspect", str(skrl), "--json")
    assert code == 0 and episodes(guessed)["num_envs"] == 1
    assert len(warning) == 1 and "--num-envs" in warning[0] and warning[0].startswith("warning:")
    code, told, quiet = expcli("inspect", str(skrl), "--json", "--num-envs", str(ENVS))
    assert code == 0 and quiet == []
    assert episodes(told) == episodes(expected)  # lengths 2, 3 and 4 as in the source


def test_convert_sample_and_load_take_num_envs(source: Path, tmp_path: Path) -> None:
    skrl = tmp_path / "sk.csv"
    assert expcli("convert", str(source), str(skrl), "--layout", "skrl")[0] == 0
    back = tmp_path / "back.h5"
    code, _, lines = expcli("convert", str(skrl), str(back), "--num-envs", str(ENVS))
    assert code == 0 and lines == []
    original, converted = load(source), load(back)
    assert converted.num_envs == ENVS
    for name, array in original.tensors.items():
        np.testing.assert_array_equal(
            converted.tensors[name], array.astype(converted.tensors[name].dtype)
        )
    assert load(skrl, num_envs=ENVS).num_envs == ENVS
    code, out, lines = expcli("sample", str(skrl), "--json", "--num-envs", str(ENVS), "--seed", "0")
    assert code == 0 and lines == [] and json.loads(out)["transitions"] == 12 * ENVS
    code, _, lines = expcli("sample", str(skrl), "--json", "--seed", "0")
    assert code == 0 and len(lines) == 1 and "--num-envs" in lines[0]


@pytest.mark.parametrize(
    "target, layout, said",
    [
        ("out.npz", "d4rl", "the d4rl layout writes hdf5 files, not npz"),
        ("out.pt", "tianshou", "the tianshou layout writes hdf5 files, not pt"),
        ("out.h5", "skrl", "the skrl layout writes pt, npz, csv files, not hdf5"),
        ("out.h5", "minari", "the minari layout writes a dataset folder"),
    ],
)
def test_a_suffix_the_layout_cannot_have_is_refused_before_writing(
    source: Path, tmp_path: Path, target: str, layout: str, said: str
) -> None:
    code, _, lines = expcli("convert", str(source), str(tmp_path / target), "--layout", layout)
    assert code == 2 and len(lines) == 1 and said in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ant.npz"]  # nothing written


def test_a_format_the_suffix_contradicts_is_refused(source: Path, tmp_path: Path) -> None:
    args = ("convert", str(source), str(tmp_path / "o.pt"), "--layout", "skrl", "--to", "npz")
    code, _, lines = expcli(*args)
    assert (
        code == 2
        and len(lines) == 1
        and "o.pt names pt but --to says npz; drop --to or name the file o.npz" in lines[0]
    )
