"""What a terminal shows while commands run: bars with percentage and ETA, unbroken paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from expcli.cli.app import app
from expcli.formats import write_dataset
from tests.summary.datasets import random_dataset

TERMINAL = {"COLUMNS": "120", "TTY_INTERACTIVE": "1", "TTY_COMPATIBLE": "1", "NO_COLOR": "1"}
PERCENT = re.compile(r"\b\d{1,3}%")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ETA = re.compile(r"ETA \d+:\d\d:\d\d")


def _terminal(*args: str, code: int = 0) -> tuple[str, str]:
    """stdout and stderr of a command run as on a 120-column terminal."""
    result = CliRunner().invoke(app, list(args), env=TERMINAL)
    assert result.exit_code == code, result.stderr + result.stdout
    return result.stdout, ANSI.sub("", result.stderr)


def test_collect_steps_bar_shows_percentage_and_eta(tmp_path: Path) -> None:
    _, err = _terminal(
        "collect", "CartPole-v1", "--steps", "300", "--mode", "dummy", "-o", str(tmp_path / "a.npz")
    )
    assert "100%" in err and ETA.search(err), err[-2000:]


def test_collect_episodes_bar_shows_percentage_and_eta(tmp_path: Path) -> None:
    _, err = _terminal(
        "collect", "CartPole-v1", "--episodes", "3", "--mode", "dummy", "-o", str(tmp_path / "a.pt")
    )
    assert "100%" in err and ETA.search(err), err[-2000:]


def test_collect_prints_a_long_path_whole_on_its_own_line(tmp_path: Path) -> None:
    folder = tmp_path.joinpath(*(["a-rather-long-folder-name"] * 4))
    folder.mkdir(parents=True)
    out = folder / "CartPole-v1-20261126-233500.npz"
    _, err = _terminal("collect", "CartPole-v1", "--steps", "8", "--mode", "dummy", "-o", str(out))
    lines = err.replace("\r", "\n").splitlines()
    [first] = [line for line in lines if line.startswith("collecting CartPole-v1")]
    assert str(out) not in first and len(first) <= 120
    assert f"  into {out}" in lines


@pytest.mark.parametrize("shards", [False, True])
def test_inspect_check_of_a_large_dataset_shows_a_bar_from_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: bool
) -> None:
    import expcli.cli.inspect_cmd as inspect_cmd
    from expcli.formats import sharded

    dataset = random_dataset(64, 2)
    if shards:
        path = tmp_path / "run"
        sharded.write(dataset, path, overwrite=False, shard_bytes=1024)
        assert len(list(path.glob("*.npz"))) > 1 or len(list(path.iterdir())) > 2
    else:
        path = write_dataset(dataset, tmp_path / "run.npz")
    monkeypatch.setattr(inspect_cmd, "PROGRESS_MIN_BYTES", 1)
    _, err = _terminal("inspect", str(path), "--check", code=1)  # random rows: not continuous
    assert "checking" in err and PERCENT.search(err) and ETA.search(err), err[-2000:]


def test_summarize_check_of_a_folder_reports_the_shards_then_the_pass(tmp_path: Path) -> None:
    from expcli.formats import sharded
    from expcli.summary import summarize

    path = tmp_path / "run"
    sharded.write(random_dataset(64, 2), path, overwrite=False, shard_bytes=1024)
    seen: list[float] = []
    summarize(path, check=True, progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == 1.0
    assert any(0 < f < 0.5 for f in seen) and 0.5 in seen, seen  # shards, then the pass


def test_convert_bar_shows_percentage_and_eta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import expcli.cli.convert_cmd as convert_cmd

    src = write_dataset(random_dataset(64, 2), tmp_path / "run.npz")
    monkeypatch.setattr(convert_cmd, "PROGRESS_MIN_BYTES", 1)
    _, err = _terminal("convert", str(src), str(tmp_path / "run.h5"))
    assert PERCENT.search(err) and ETA.search(err), err[-2000:]
