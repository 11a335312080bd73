"""The folder fuzzer in CI: seeded mutants of sharded, LeRobot and Minari folders through
the readers; no traceback, hang or blow-up, no read outside the folder, no change to it.

``python -m tests.fuzz.campaign --folders --minutes 10`` is its longer campaign (same code).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from expcli import load
from tests.fuzz.campaign import FOLDER_OPS, Settings, run_campaign
from tests.fuzz.folders import FOLDER_SEED, FRAMES_SEED, PARQUET_SEED

FOLDERS = 40  # seeded folder mutants in CI: half sharded, half LeRobot and Minari (about 40 s)


def test_the_folder_seed_is_a_small_collected_folder() -> None:
    dataset = load(FOLDER_SEED)
    assert dataset.memory_size == 4 and dataset.metadata["collector"]["collect_settings"]
    assert sorted(p.name for p in FOLDER_SEED.iterdir()) == [
        "manifest.json",
        "shard-000000.npz",
        "shard-000001.npz",
    ]
    assert sum(p.stat().st_size for p in FOLDER_SEED.iterdir()) < 16 * 1024


def test_the_parquet_folder_seed_is_the_same_run_in_parquet_shards() -> None:
    """Every fourth folder mutant starts from it (``folders.seed_for``)."""
    dataset, npz = load(PARQUET_SEED), load(FOLDER_SEED)
    for name, want in npz.tensors.items():
        assert np.array_equal(dataset.tensors[name], want), name
    assert sorted(p.name for p in PARQUET_SEED.iterdir()) == [
        "README.md",
        "manifest.json",
        "shard-000000.parquet",
        "shard-000001.parquet",
    ]
    assert sum(p.stat().st_size for p in PARQUET_SEED.iterdir()) < 24 * 1024


def test_the_frames_folder_seed_stores_next_observations_once() -> None:
    """Every fourth folder mutant starts from it: shards of the sparse form, last rows kept."""
    from expcli import summarize

    assert load(FRAMES_SEED).metadata["collector"]["collect_settings"]
    assert summarize(FRAMES_SEED).frames["next_observations"].kept == 4  # the shards' last rows
    manifest = json.loads((FRAMES_SEED / "manifest.json").read_text())
    assert manifest["schema"] == "expcli/2"
    assert sum(p.stat().st_size for p in FRAMES_SEED.iterdir()) < 16 * 1024


@pytest.mark.slow
def test_no_folder_mutant_escapes_hangs_reads_outside_or_changes_the_folder(
    tmp_path: Path,
) -> None:
    report = run_campaign(Settings(files=FOLDERS, campaign=0, folders=True, timeout=20))
    assert report.runs == FOLDERS * len(FOLDER_OPS)
    assert report.outcomes["error"] > 0 and report.outcomes["ok"] > 0
    if report.bad:
        shown = json.dumps(report.failures[:10], indent=1)
        pytest.fail(f"{report.table()}\n{shown}")
