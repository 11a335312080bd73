"""merge, split and filter stream: a small and a five times larger dataset take about the
same peak memory (``tests.memory_probe``), from a mapped ``.npz`` and from a gzip ``.h5``
(read through the cache of row blocks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from expcli import save
from expcli.formats.dataset import Dataset
from expcli.spec import CircularState
from tests.memory_probe import Run, assert_flat, frames_data, run_child

_VERBS = """
import sys
from expcli.shaping.verbs import filter_episodes, merge, split
npz, h5, out = sys.argv[1:4]
filter_episodes(npz, out + "/filtered.npz", where="length >= 2")
merge([h5, npz], out + "/merged.npz")
split(h5, [out + "/a.npz", out + "/b.h5"], fractions=[0.9, 0.1])
"""


@pytest.mark.slow
def test_the_verbs_stream(tmp_path: Path) -> None:
    def verbs(mib: float) -> Run:
        half = mib / 2  # the merge reads both files: mib MiB in all
        data = Dataset(frames_data(half, True), CircularState(0, 0, True))
        npz = save(data, tmp_path / f"{mib:.0f}.npz")
        h5 = save(data, tmp_path / f"{mib:.0f}.h5", compression="gzip")
        out = tmp_path / f"out-{mib:.0f}"
        out.mkdir()
        run = run_child(["-c", _VERBS, str(npz), str(h5), str(out)], 600,
                        imports=("expcli.shaping.verbs", "expcli.formats.npz_format",
                                 "expcli.formats.hdf5_format"))  # fmt: skip
        assert run.returncode == 0, run.stderr
        for path in (npz, h5, *out.iterdir()):
            path.unlink()
        return run

    assert_flat(verbs)
