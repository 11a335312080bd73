"""Progress when stderr is not a terminal (a log under nohup, Slurm or CI): a plain line every
``EXPCLI_PROGRESS_SECONDS``, with steps, rate, episodes and ETA, never cut to 80 columns."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from expcli.cli._console import PROGRESS_SECONDS, ProgressLog
from expcli.cli.app import app
from expcli.formats import write_dataset
from tests.summary.datasets import random_dataset

COLLECT_LINE = re.compile(
    r"^collect, (\d+)%, ([\d,]+) of 3,000 steps, [\d.k]+ steps/s, [\d,]+ episodes, "
    r"return \S+, elapsed \d+:\d\d:\d\d(, ETA \d+:\d\d:\d\d)?$"
)


def test_collect_logs_progress_lines_to_a_file(tmp_path: Path) -> None:
    log = tmp_path / "collect.log"
    args = ["collect", "CartPole-v1", "--steps", "3000", "--mode", "dummy"]
    env = {**os.environ, PROGRESS_SECONDS: "0", "COLUMNS": "80"}
    with open(log, "w") as err:
        subprocess.run(
            [sys.executable, "-m", "expcli", *args, "-o", str(tmp_path / "run.npz")],
            stdout=subprocess.DEVNULL, stderr=err, env=env, check=True, timeout=120,
        )  # fmt: skip
    lines = log.read_text().splitlines()
    progress = [m for line in lines if (m := COLLECT_LINE.match(line))]
    assert len(progress) >= 2, lines
    assert progress[-1][1] == "100" and progress[-1][2] == "3,000"
    assert any(len(m[0]) > 80 for m in progress)  # whole, not cut at the width
    assert any(m[3] for m in progress)  # an ETA while running
    assert "\r" not in log.read_text() and "\x1b" not in log.read_text()


def test_a_log_gets_one_line_per_interval_and_the_last_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PROGRESS_SECONDS, "10")
    now = [0.0]
    log = ProgressLog("converting", clock=lambda: now[0])
    for second in range(35):
        now[0] = float(second)
        log.update(second / 35, "write")
    log.close()
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "converting, 29%, write, elapsed 0:00:10, ETA 0:00:25",
        "converting, 57%, write, elapsed 0:00:20, ETA 0:00:15",
        "converting, 86%, write, elapsed 0:00:30, ETA 0:00:05",
        "converting, 97%, write, elapsed 0:00:34, ETA 0:00:01",
    ]


@pytest.mark.parametrize(
    ("module", "args", "word"),
    [
        ("convert_cmd", ["convert", "SRC", "OUT.h5"], "converting"),
        ("shape_cmds", ["merge", "SRC", "SRC", "-o", "OUT.npz"], "merging"),
        ("shape_cmds", ["split", "SRC", "-o", "OUT.npz", "-o", "OTHER.npz"], "splitting"),
        ("shape_cmds", ["filter", "SRC", "--top", "2", "-o", "OUT.npz"], "filtering"),
        ("inspect_cmd", ["inspect", "SRC"], "reading"),
    ],
)
def test_big_data_commands_log_progress_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, args: list[str], word: str
) -> None:
    import importlib

    src = write_dataset(random_dataset(64, 2), tmp_path / "src.npz")
    monkeypatch.setattr(importlib.import_module(f"expcli.cli.{module}"), "PROGRESS_MIN_BYTES", 1)
    named = {
        "SRC": str(src),
        "OUT.h5": str(tmp_path / "out.h5"),
        "OUT.npz": str(tmp_path / "o.npz"),
    }
    named["OTHER.npz"] = str(tmp_path / "other.npz")
    result = CliRunner().invoke(
        app, [named.get(a, a) for a in args], env={PROGRESS_SECONDS: "0", "COLUMNS": "40"}
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith(word + ", ")]
    assert lines and re.search(r", 100%, .*elapsed \d:\d\d:\d\d$", lines[-1]), result.stderr
