"""Without the ``envpool`` extra: one line saying what to install; ``auto`` goes on without it.

The package is hidden from a fresh interpreter (a ``sitecustomize`` that sets
``sys.modules["envpool"] = None``, which makes ``import envpool`` raise ImportError), not
uninstalled, so the test runs whether or not the extra is here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from expcli import load

HINT = (
    "envpool is required for EnvPool's envs (--mode envpool); install it with: "
    'pip install "expcli[envpool]"'
)


def expcli_without_envpool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    hide = tmp_path / "hide"
    hide.mkdir(exist_ok=True)
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['envpool'] = None\n")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hide), str(root)]), "NO_COLOR": "1"}
    code = "import sys; from expcli.cli import main; sys.argv[0] = 'expcli'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=tmp_path
    )


@pytest.mark.parametrize(
    "args",
    [
        ["collect", "CartPole-v1", "--mode", "envpool", "--steps", "10"],
        ["envs", "--envpool", "pong"],
    ],
)
def test_envpool_without_the_extra_is_one_line(tmp_path: Path, args: list[str]) -> None:
    out = expcli_without_envpool(tmp_path, *args)
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines() == [f"error: {HINT}"]
    assert out.stdout == ""
    assert not (tmp_path / "runs").exists()


def test_auto_skips_envpool_without_the_extra_and_says_why(tmp_path: Path) -> None:
    path = tmp_path / "mc.npz"
    out = expcli_without_envpool(
        tmp_path, "collect", "MountainCar-v0", "--steps", "20", "-q", "-o", str(path)
    )
    assert out.returncode == 0, out.stderr
    probes = load(path).metadata["collector"]["probes"]
    [envpool] = [p for p in probes if p["mode"] == "envpool"]
    assert envpool["skipped"] == 'EnvPool is not installed (pip install "expcli[envpool]")'
