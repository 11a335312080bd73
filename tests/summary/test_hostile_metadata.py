"""Metadata that made ``inspect`` hang, blow up or escape (issue 13): spaces are described,
never materialised; odd sections, widths and magnitudes are reported, not tracebacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from expcli.errors import SchemaError
from expcli.formats import Dataset, write_dataset
from expcli.spec import CircularState
from expcli.summary import summarize
from expcli.summary.episodes import histogram
from expcli.summary.space_bounds import parse_space
from tests.memory_probe import run_child


def dataset(metadata: dict[str, Any], rewards: np.ndarray | None = None) -> Dataset:
    rng = np.random.default_rng(0)
    observations = rng.normal(size=(6, 1, 3)).astype(np.float32)
    done = np.zeros((6, 1, 1), bool)
    done[[1, 3, 5]] = True
    following = np.roll(observations, -1, axis=0)
    following[done[:, 0, 0]] += 100  # each episode's final observation, never seen again
    return Dataset(
        {
            "observations": observations,
            "next_observations": following,
            "actions": rng.integers(0, 2, size=(6, 1, 1)),
            "rewards": np.ones((6, 1, 1)) if rewards is None else rewards.reshape(6, 1, 1),
            "terminated": done,
            "truncated": np.zeros((6, 1, 1), bool),
        },
        CircularState(0, 0, True),
        metadata,
    )


def inspect_check(path: Path, timeout: float = 60) -> tuple[int | None, float, str]:
    run = run_child(["-m", "expcli", "inspect", str(path), "--check"], timeout=timeout)
    assert not run.timed_out, "inspect --check hung"
    assert "Traceback" not in run.stderr, run.stderr[-1500:]
    return run.returncode, run.peak_mb, run.stdout


HUGE_BOX = {"type": "Box", "low": -1.0, "high": 1.0, "shape": [100_000] * 3, "dtype": "float32"}


def test_a_huge_box_in_the_metadata_is_described_not_built(tmp_path: Path) -> None:
    path = write_dataset(dataset({"observation_space": HUGE_BOX}), tmp_path / "box.npz")
    code, peak, out = inspect_check(path)
    assert code == 1 and peak < 500  # the metadata check fails: the data is (3,)
    assert "Box(low=-1, high=1, shape=(100000, 100000, 100000), dtype=float32)" in out


def test_a_huge_multibinary_in_the_metadata_is_described_not_built(tmp_path: Path) -> None:
    space = {"type": "MultiBinary", "n": [20_000, 20_000]}
    path = write_dataset(dataset({"action_space": space}), tmp_path / "mb.npz")
    code, peak, out = inspect_check(path)
    assert code == 1 and peak < 500, peak  # 20000 x 20000 float64 bounds: 3.2 GB
    assert "MultiBinary([20000, 20000])" in out


@pytest.mark.parametrize(
    "space",
    [
        {"type": "Discrete", "n": 10**400},
        {"type": "MultiDiscrete", "nvec": [10**400, 2]},
        {"type": "Discrete", "n": -3},
        {"type": "Box", "low": "x", "high": None, "shape": [3], "dtype": "float3"},
        {"type": "Box", "low": [0.0, 1.0], "high": 1.0, "shape": [3], "dtype": "float32"},
        {"type": "MultiBinary", "n": [-1]},
    ],
)
def test_spaces_that_make_no_sense_are_left_unchecked(space: dict[str, Any]) -> None:
    assert parse_space(space) is None


def test_a_discrete_space_too_large_for_a_float_is_no_traceback(tmp_path: Path) -> None:
    metadata = {"action_space": {"type": "Discrete", "n": 2**64 - 1}}
    path = write_dataset(dataset(metadata), tmp_path / "d.npz")
    code, _, out = inspect_check(path)
    assert code == 0 and "actions      Discrete" in out  # named, not checked


def test_an_integer_past_64_bits_is_neither_written_nor_read(tmp_path: Path) -> None:
    """No reader takes it back (it overflowed where numpy took it): the writer refuses it too."""
    metadata = {"action_space": {"type": "Discrete", "n": 10**400}}
    with pytest.raises(SchemaError, match="beyond 64 bits") as info:
        write_dataset(dataset(metadata), tmp_path / "d.npz")
    assert info.value.key == "action_space" and not (tmp_path / "d.npz").exists()
    path = write_dataset(
        dataset({"action_space": {"type": "Discrete", "n": 7}}), tmp_path / "d.npz"
    )
    members = dict(np.load(path))
    members["__expcli__"] = np.array(
        str(members["__expcli__"]).replace('"n": 7', f'"n": {10**400}')
    )
    np.savez(path, **members)
    code, _, _ = inspect_check(path)
    assert code == 1


def test_bounds_broadcast_against_rows_without_being_expanded() -> None:
    bounds = parse_space({"type": "Box", "low": 0.0, "high": [1.0, 2.0], "shape": [2]})
    assert bounds is not None and bounds.low.shape == ()
    rows = np.array([[[0.5, 1.5]], [[0.5, 2.5]], [[-1.0, 0.0]]])
    assert bounds.outside(rows).tolist() == [[False], [True], [True]]


def test_a_d4rl_section_that_is_not_an_object_is_no_traceback(tmp_path: Path) -> None:
    for section in ("x", [["terminals"]], {"missing": "timeouts"}):
        path = write_dataset(
            dataset({"layout": "d4rl", "d4rl": section}), tmp_path / "d.npz", overwrite=True
        )
        summary = summarize(path, check=True)
        flags = next(f for f in summary.checks or () if f.check == "d4rl_flags")
        assert flags.status == "passed"


def test_a_skrl_csv_whose_observation_widths_differ_skips_the_pairs(tmp_path: Path) -> None:
    path = tmp_path / "skrl.csv"
    header = [f"observations.{i}" for i in range(4)] + [f"next_observations.{i}" for i in range(3)]
    rows = [",".join(str(float(v)) for v in range(7))] * 5
    path.write_text(
        ",".join([*header, "terminated.0"]) + "\n" + "\n".join(r + ",False" for r in rows) + "\n"
    )
    summary = summarize(path, check=True)
    continuity = next(f for f in summary.checks or () if f.check == "continuity")
    assert continuity.status == "skipped" and "differ in feature shape" in continuity.message


@pytest.mark.parametrize(
    "values",
    [
        [1e17, 1e17 + 16, 1e17, 1e17 + 32],  # a range too narrow for ten float64 bins
        [-1.7e308, 1.7e308, 0.0, 1.0],  # a range wider than float64 holds
    ],
)
def test_histograms_of_extreme_returns(values: list[float]) -> None:
    edges, counts = histogram(np.array(values))
    assert sum(counts) == len(values)
    assert edges[0] == min(values) and edges[-1] == max(values)


def test_returns_of_1e17_are_summarized(tmp_path: Path) -> None:
    rewards = np.array([1e17, 1e17 + 16, 1e17, 1e17 + 32, 1e17, 1e17])
    path = write_dataset(dataset({}, rewards), tmp_path / "big.npz")
    summary = summarize(path)
    assert summary.episodes is not None and sum(summary.episodes.histogram[1]) == 3


def test_text_that_is_not_utf8_is_printed_escaped(tmp_path: Path) -> None:
    metadata = {"env_id": "bad \udcff\udcfe [bold]id[/bold]"}
    path = write_dataset(dataset(metadata), tmp_path / "utf.npz")
    for args in ([], ["--check"], ["--json"]):
        run = run_child(["-m", "expcli", "inspect", str(path), *args])  # strict UTF-8 stdout
        assert run.returncode == 0, run.stderr[-1500:]
        if args == ["--json"]:
            assert json.loads(run.stdout)["metadata"]["env_id"] == metadata["env_id"]
        else:
            assert "bad \\udcff\\udcfe [bold]id[/bold]" in run.stdout
