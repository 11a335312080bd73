"""Converting from and to the foreign layouts streams: a tianshou file, a Minari folder
and a D4RL file read as several env columns, converted to expcli's ``.h5``, and an expcli
``.h5`` written with ``--layout d4rl``, ``tianshou`` or ``skrl`` (``.pt`` and ``.npz``),
take about the same peak memory for a small and a large file (a child process's peak
RSS)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from expcli import save
from expcli.formats import Dataset
from expcli.formats.layouts import write_layout
from expcli.spec import CircularState
from tests.test_bounded_readers import FLAT_MB, LARGE_MB, SMALL_MB, frames_data, growth_mib


def frames(megabytes: int) -> Dataset:
    """``frames_data`` as a layout needs it: frames as observations, and actions."""
    tensors = frames_data(megabytes, False)
    tensors["observations"] = tensors.pop("frames")
    tensors["actions"] = np.zeros(tensors["rewards"].shape, np.int64)
    return Dataset(tensors, CircularState(0, 0, True))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("layout", "target"),
    [("d4rl", "d4rl.h5"), ("tianshou", "tianshou.h5"), ("skrl", "skrl.pt"), ("skrl", "skrl.npz")],
)
def test_writing_a_foreign_layout_streams(tmp_path: Path, layout: str, target: str) -> None:
    def peak(megabytes: int) -> int:
        source = save(frames(megabytes), tmp_path / f"{megabytes}.h5")
        return growth_mib(tmp_path, "convert", source, tmp_path / target, layout)

    small, large = peak(SMALL_MB), peak(LARGE_MB)
    assert large - small < FLAT_MB, (small, large)


@pytest.mark.slow
def test_converting_a_tianshou_file_streams(tmp_path: Path) -> None:
    def peak(megabytes: int) -> int:
        source = tmp_path / f"tianshou-{megabytes}.h5"
        write_layout(frames(megabytes), source, "tianshou", overwrite=True)
        return growth_mib(tmp_path, "convert", source, tmp_path / f"{megabytes}.h5")

    small, large = peak(SMALL_MB), peak(LARGE_MB)
    assert large - small < FLAT_MB, (small, large)


@pytest.mark.slow
def test_converting_a_d4rl_file_of_several_env_columns_streams(tmp_path: Path) -> None:
    def peak(megabytes: int) -> int:
        source = tmp_path / f"d4rl-{megabytes}.h5"
        write_layout(frames(megabytes), source, "d4rl", overwrite=True)  # 4 env columns
        target = tmp_path / f"{megabytes}.h5"
        return growth_mib(tmp_path, "convert", source, target, "expcli", 4)

    # 24 MB would not fill the reading pipeline (a slice, the one read ahead, a column's)
    small, large = peak(2 * SMALL_MB), peak(LARGE_MB)
    assert large - small < FLAT_MB, (small, large)


@pytest.mark.slow
def test_converting_a_minari_folder_streams(tmp_path: Path) -> None:
    def peak(megabytes: int) -> int:
        source = tmp_path / f"minari-{megabytes}"
        write_layout(frames(megabytes), source, "minari", overwrite=True)  # ~500 episodes
        return growth_mib(tmp_path, "convert", source, tmp_path / f"{megabytes}.h5")

    # a slice, the one read ahead, the episodes' rows and the writer's fill ~100 MB: both
    # sizes must go beyond it for a flat peak to show (read whole: 96 MB more)
    small, large = peak(LARGE_MB), peak(2 * LARGE_MB)
    assert large - small < FLAT_MB, (small, large)
