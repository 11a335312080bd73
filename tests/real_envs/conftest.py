"""Every real-env test runs in its own temporary folder.

Envs write beside the working directory (MuJoCo appends its warnings to
``MUJOCO_LOG.TXT`` there), and the worktree is no place for that.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
