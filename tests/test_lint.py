"""Layering holds: ruff (TID253) bans heavy module-level imports outside their owners."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINTED = ("expcli", "tests", "benchmarks", "examples", "scripts")  # scripts: the docs hook


def test_ruff_finds_nothing() -> None:
    if shutil.which("ruff") is None and not (Path(sys.executable).parent / "ruff").exists():
        pytest.skip("ruff is not installed (dev extra)")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", *LINTED],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
