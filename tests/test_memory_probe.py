"""The memory tests' harness can fail: the same measurements as the streaming tests, made
of a reader that holds whole arrays (a conversion, a replay sample, a collect run kept in
memory), are flagged as growing with the data, by several times the bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.collect.test_folder_collect import collect_run
from tests.memory_probe import Growth, Run, assert_grows, convert_run, sample_run
from tests.test_bounded_readers import frames_file


def test_the_bound_scales_with_the_extra_data() -> None:
    assert Growth(48, 240, 60.0, 100.0).flat  # +40 MiB of noise: below a quarter of 192
    assert not Growth(48, 240, 60.0, 110.0).flat
    assert Growth(96, 480, 60.0, 150.0).flat
    assert "+40 MiB against a bound of 48 MiB" in str(Growth(48, 240, 60.0, 100.0))


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".h5", ".npz"])
def test_a_conversion_reading_whole_arrays_grows(tmp_path: Path, suffix: str) -> None:
    def convert(mib: float) -> Run:
        source = frames_file(tmp_path, mib, suffix)
        run = convert_run(source, tmp_path / "out.h5", whole=True)
        source.unlink()
        return run

    assert_grows(convert)


@pytest.mark.slow
def test_sampling_from_whole_arrays_grows(tmp_path: Path) -> None:
    def sample(mib: float) -> Run:
        source = frames_file(tmp_path, mib, ".npz")
        run = sample_run(source, whole=True)
        source.unlink()
        return run

    assert_grows(sample, 24, 216)  # the sizes test_sampling_a_file_holds_only_the_batch uses


@pytest.mark.slow
def test_a_collect_run_held_in_memory_grows(tmp_path: Path) -> None:
    assert_grows(lambda mib: collect_run(tmp_path / f"{mib:.0f}.npz", mib, "--no-spool"))
