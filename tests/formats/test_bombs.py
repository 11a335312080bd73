"""Decompression bombs: a few megabytes that would inflate into gigabytes are refused before
anything is inflated, by every reader (``load``, ``convert``), in a few seconds and little
memory; the file fuzzer's three findings (a zip bomb ``.npz`` hanging ``load`` and
``convert``, an ``.h5`` bomb taking ``load`` past a gigabyte)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.bombs import INFLATED_BYTES, bomb_h5, bomb_npz
from tests.memory_probe import run_child


def _bomb(tmp_path: Path, kind: str) -> Path:
    if kind == "h5":
        return bomb_h5(tmp_path / "bomb.h5")
    path = tmp_path / "bomb.npz"
    path.write_bytes(bomb_npz(False))
    return path


@pytest.mark.parametrize("kind", ["npz", "h5"])
@pytest.mark.parametrize("command", ["load", "convert"])
def test_a_bomb_inflating_past_a_gigabyte_is_refused_before_inflating(
    tmp_path: Path, kind: str, command: str
) -> None:
    bomb = _bomb(tmp_path, kind)
    assert bomb.stat().st_size * 500 < INFLATED_BYTES
    if command == "load":
        code = f"import expcli\nexpcli.load({str(bomb)!r})"
        run = run_child(["-c", code], timeout=120)
        assert "FormatError" in run.stderr, run.stderr[-2000:]
    else:
        target = tmp_path / "out.npz"
        run = run_child(["-m", "expcli", "convert", str(bomb), str(target)], timeout=120)
        assert run.returncode == 1 and len(run.lines) == 1, run.stderr[-2000:]
        assert not target.exists()
    assert "decompression bomb" in run.stderr and str(bomb) in run.stderr
    assert run.peak_mb < 400, run.peak_mb  # nothing inflated: the member alone is 1.2 GiB
