"""``expcli inspect``: tables, JSON, the newest file under runs/, --check, errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli.cli import app
from expcli.formats import Dataset, write_dataset
from expcli.spec import CircularState
from tests.format_catalogue import FILE_FORMATS, suffix_of
from tests.summary.datasets import random_dataset

KEYS = {"path", "format", "layout", "size_bytes", "memory_size", "num_envs", "transitions",
        "wrapped", "metadata", "tensors", "episodes"}  # fmt: skip
TENSOR_KEYS = {"name", "dtype", "shape", "min", "max", "mean", "std", "nan", "inf"}
EPISODE_KEYS = {"complete", "incomplete", "terminated", "truncated", "return", "length"}


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def npz(tmp_path: Path) -> Path:
    dataset = random_dataset(state=CircularState(3, 1, True), metadata={"env_id": "Toy-v0"})
    dataset.tensors["observations"][4, 2, 1] = np.nan
    return write_dataset(dataset, tmp_path / "toy.npz")


def test_json_is_one_object_with_the_documented_keys(runner: CliRunner, npz: Path) -> None:
    result = runner.invoke(app, ["inspect", str(npz), "--json", "--per-env"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert KEYS <= data.keys() and "checks" not in data
    assert data["path"] == str(npz) and data["format"] == "npz" and data["layout"] == "expcli"
    assert data["wrapped"] is True and data["transitions"] == 21
    assert data["metadata"]["env_id"] == "Toy-v0"
    obs = next(t for t in data["tensors"] if t["name"] == "observations")
    assert TENSOR_KEYS <= obs.keys() and obs["nan"] == 1
    assert EPISODE_KEYS <= data["episodes"].keys() and len(data["episodes"]["per_env"]) == 3
    assert set(data["episodes"]["return"]) == {"mean", "std", "min", "median", "max"}


def test_json_writes_null_for_nan(runner: CliRunner, tmp_path: Path) -> None:
    dataset = random_dataset(done_rate=0.0)
    dataset.tensors["log_prob"][:] = np.nan
    path = write_dataset(dataset, tmp_path / "n.h5")
    data = json.loads(runner.invoke(app, ["inspect", str(path), "--json"]).stdout)
    log_prob = next(t for t in data["tensors"] if t["name"] == "log_prob")
    assert log_prob["mean"] is None and data["episodes"]["return"]["mean"] is None
    assert "NaN" not in runner.invoke(app, ["inspect", str(path), "--json"]).stdout


def test_tables(runner: CliRunner, npz: Path) -> None:
    result = runner.invoke(app, ["inspect", str(npz), "--per-env", "--head", "2"],
                           env={"COLUMNS": "200"})  # fmt: skip
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in ("toy.npz", "npz, expcli layout", "Toy-v0", "7 rows × 3 envs", "21 valid",
                 "wrapped", "observations", "episodes", "returns", "first 2 transitions",
                 "episodes per env column"):  # fmt: skip
        assert text in out, text
    assert "3, 1" in out  # the oldest transition: row 3, env 1


def test_no_episodes(runner: CliRunner, npz: Path) -> None:
    data = json.loads(runner.invoke(app, ["inspect", str(npz), "--json", "--no-episodes"]).stdout)
    assert data["episodes"] is None


def test_newest_dataset_under_runs(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    runs.mkdir()
    old = write_dataset(random_dataset(), runs / "old.npz")
    new = write_dataset(random_dataset(), runs / "CartPole-v1-2024.h5")
    os.utime(old, (1, 1))
    os.utime(new, (2, 2))
    for junk in (".new.npz.1234.tmp", "later.npz.partial", "CartPole-v1-2024.h5.meta.json"):
        (runs / junk).write_text("not a dataset")
    result = runner.invoke(app, ["inspect"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"newest dataset under runs/: {Path('runs') / new.name}"
    data = json.loads(runner.invoke(app, ["inspect", "--json"]).stdout)
    assert data["path"] == str(Path("runs") / new.name)


def test_no_runs_folder_is_a_usage_error(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["inspect"])
    assert result.exit_code == 2
    assert "no dataset" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_check_exit_codes(runner: CliRunner, tmp_path: Path) -> None:
    dataset = random_dataset(size=5, envs=1, done_rate=0.0)
    tensors = dataset.tensors
    tensors["next_observations"][:-1] = tensors["observations"][1:]
    good = write_dataset(dataset, tmp_path / "good.npz")
    result = runner.invoke(app, ["inspect", str(good), "--check"])
    assert result.exit_code == 0, result.output
    assert "checks: all passed" in result.stdout
    tensors["next_observations"][1, 0, 0] += 1
    bad = write_dataset(dataset, tmp_path / "bad.npz")
    result = runner.invoke(app, ["inspect", str(bad), "--check"])
    assert result.exit_code == 1 and "FAIL" in result.stdout and "(1, 0)" in result.stdout
    data = json.loads(runner.invoke(app, ["inspect", str(bad), "--check", "--json"]).stdout)
    continuity = next(c for c in data["checks"] if c["check"] == "continuity")
    assert continuity["status"] == "failed" and continuity["rows"] == [[1, 0]]


@pytest.mark.parametrize(
    "content",
    [b"", b"PK\x03\x04 truncated zip", b"\x89HDF\r\n\x1a\n" + b"\0" * 100, b"\x00\xff" * 50],
    ids=["empty", "truncated-zip", "broken-hdf5", "binary"],
)
def test_corrupt_file_is_one_line_and_exit_1(
    runner: CliRunner, tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    for extra in ([], ["--check"], ["--json"]):
        result = runner.invoke(app, ["inspect", str(path), *extra])
        assert result.exit_code == 1, (extra, result.output)
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and "bad.npz" in lines[0]


def test_missing_file(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["inspect", str(tmp_path / "nope.pt")])
    assert result.exit_code == 1 and "no such file" in result.stderr


def _modules_after_inspect(path: Path) -> set[str]:
    code = (
        "import json, sys\n"
        "from expcli.cli import main\n"
        f"sys.argv = ['expcli', 'inspect', {str(path)!r}, '--json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return {m.split(".")[0] for m in json.loads(out.stdout.splitlines()[-1])}


def test_torch_is_imported_only_for_pt_files(tmp_path: Path) -> None:
    dataset = random_dataset()
    for fmt in (f for f in FILE_FORMATS if f != "pt"):  # a .pt file is torch's
        loaded = _modules_after_inspect(write_dataset(dataset, tmp_path / f"d{suffix_of(fmt)}"))
        assert "numpy" in loaded and "torch" not in loaded, fmt
        assert not loaded & {"gymnasium", "ray"}
    assert "torch" in _modules_after_inspect(write_dataset(dataset, tmp_path / "d.pt"))


def test_a_layout_that_is_not_utf8_prints_escaped_on_a_strict_stdout(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    write_dataset(random_dataset(size=6, envs=2), csv)
    sidecar = tmp_path / "t.csv.meta.json"
    header = json.loads(sidecar.read_text())
    header["layout"] = "\udcff"  # a lone surrogate: what undecodable bytes become
    sidecar.write_text(json.dumps(header))
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "expcli", "inspect", str(csv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "\\udcff layout" in done.stdout


def _frames_dataset(metadata: dict) -> Dataset:
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (6, 2, 3, 84, 84), dtype=np.uint8)
    frames[0, 0] = 7  # the first transition shown: one value, so its range is known
    tensors = {
        "observations": frames,
        "next_observations": frames.copy(),
        "actions": rng.integers(0, 6, (6, 2, 1)),
        "rewards": np.ones((6, 2, 1), np.float32),
        "terminated": np.zeros((6, 2, 1), bool),
        "truncated": np.zeros((6, 2, 1), bool),
        "state": rng.normal(size=(6, 2, 100)).astype(np.float32),
    }
    return Dataset(tensors, CircularState(0, 0, True), metadata)


def test_head_shows_images_as_shape_and_range_not_pixels(runner: CliRunner, tmp_path: Path) -> None:
    path = write_dataset(_frames_dataset({}), tmp_path / "frames.npz")
    result = runner.invoke(app, ["inspect", str(path), "--head", "2"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    head = result.stdout.split("first 2 transitions")[1]
    assert "observations=⟨3×84×84 uint8, 7..7, mean 7⟩" in head
    assert re.search(r"state=⟨100 float32, -?[\d.]+\.\.[\d.]+, mean -?[\d.]+⟩", head), head
    assert "actions=" in head and "[7 7" not in head and len(head) < 2000


@pytest.mark.parametrize(
    ("record", "shown"),
    [
        ({"stack_num": 4, "stored": 1}, "4 frames, 1 stored per transition"),
        ({"stack_num": 4, "stored": 4}, "4 frames, 4 stored in each observation"),
    ],
)
def test_inspect_shows_the_recorded_frame_stack(
    runner: CliRunner, tmp_path: Path, record: dict, shown: str
) -> None:
    path = write_dataset(_frames_dataset({"frame_stack": record}), tmp_path / "stack.npz")
    result = runner.invoke(app, ["inspect", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.stdout.splitlines() if line.startswith("frame stack")]
    assert shown in line


def test_a_python_file_is_refused_in_one_line_not_read_as_csv(
    runner: CliRunner, tmp_path: Path
) -> None:
    path = tmp_path / "some.py"
    path.write_text("import os, sys\n\nprint(os.sep, sys.argv)\n")
    result = runner.invoke(app, ["inspect", str(path)], env={"COLUMNS": "500"})
    assert result.exit_code != 0 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}: text that is not a CSV dataset")
    assert "expected a dataset: pt" in line and "warning" not in result.stderr


def _clean(path: Path, seed: int) -> Path:
    """A dataset that passes every check: one env, continuous inside its episodes."""
    dataset = random_dataset(size=8, envs=1, seed=seed, done_rate=0.0)
    tensors = dataset.tensors
    tensors["next_observations"][:-1] = tensors["observations"][1:]
    tensors["terminated"][[2, 5]] = True
    tensors["next_observations"][[2, 5]] += 10  # episodes start from a reset, not the end
    return write_dataset(dataset, path)


def test_against_reports_shared_episodes_and_exits_1(runner: CliRunner, tmp_path: Path) -> None:
    train, val = _clean(tmp_path / "train.npz", 0), _clean(tmp_path / "val.h5", 1)
    result = runner.invoke(app, ["inspect", str(train), "--check", "--against", str(val)])
    assert result.exit_code == 0, result.output
    copy = _clean(tmp_path / "copy.h5", 0)  # the same episodes as train
    args = ["inspect", str(train), "--json", "--against", str(val), "--against", str(copy)]
    result = runner.invoke(app, args)  # --against implies --check
    assert result.exit_code == 1, result.output
    [line] = result.stdout.splitlines()
    leakage = [c for c in json.loads(line)["checks"] if c["check"] == "leakage"]
    assert [c["status"] for c in leakage] == ["passed", "failed"]
    assert leakage[1]["count"] == 3 and str(copy) in leakage[1]["message"]
    assert leakage[1]["episodes"][0] == {"episode": 0, "env": 0, "same_as": 0, "same_as_env": 0}
    duplicates = next(c for c in json.loads(line)["checks"] if c["check"] == "duplicates")
    assert duplicates["status"] == "passed" and "episodes" not in duplicates


def test_a_repeated_episode_fails_check_and_shows_its_pair(
    runner: CliRunner, tmp_path: Path
) -> None:
    dataset = random_dataset(size=8, envs=2, done_rate=0.0)
    dataset.tensors["terminated"][[1, 3], :] = True
    for array in dataset.tensors.values():
        array[4:6, 1] = array[2:4, 0]
    path = write_dataset(dataset, tmp_path / "dup.npz")
    result = runner.invoke(app, ["inspect", str(path), "--check"], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    [line] = [line for line in result.stdout.splitlines() if "duplicates" in line]
    assert "FAIL" in line and "1 of 5 complete episodes repeat" in line
    assert "episodes: 4 (env 1) = 2 (env 0)" in result.stdout
    assert "duplicates" not in runner.invoke(app, ["inspect", str(path)]).stdout
