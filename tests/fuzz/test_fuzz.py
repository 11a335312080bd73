"""The reader fuzzer in CI: seeded mutants of every format and layout through ``load``,
``inspect --json``, ``inspect --check`` and ``convert``, each in a child with a time and
memory limit. No traceback, no hang, no blow-up, no crash, no write beside the source.

The campaign is deterministic (its mutants follow from the seed); ``python -m
tests.fuzz.campaign --files N`` runs a longer one with the same code. The folder fuzzer
(``folders``) does the same to sharded folders, and also checks that no run reads outside
the folder, runs code it names, or changes it; ``python -m tests.fuzz.campaign --folders
--minutes 10`` is its campaign.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from expcli import load
from expcli.errors import ExpcliError
from tests.fuzz import header_ints
from tests.fuzz.campaign import FOLDER_OPS, OPS, Settings, run_campaign
from tests.fuzz.folders import FOLDER_SEED, FRAMES_SEED, PARQUET_SEED
from tests.fuzz.mutations import kind
from tests.fuzz.seeds import CORPUS, seeds

FILES = 600  # about 30 s on two cores; every seed file gets its share


def test_the_seed_corpus_covers_every_format_and_layout_and_is_small() -> None:
    corpus = seeds(CORPUS)
    assert {kind(seed) for seed in corpus} == {
        "pt",
        "npz",
        "csv",
        "h5",
        "parquet",
        "minari",
        "lerobot",
    }
    layouts = set()
    for seed in corpus:
        dataset = load(seed)
        assert len(dataset) > 0, seed
        layout = dataset.metadata.get("layout")
        layouts.add(
            layout if isinstance(layout, str) else ("expcli" if dataset.metadata else "skrl")
        )
    assert layouts == {"expcli", "skrl", "tianshou", "minari", "d4rl", "lerobot"}
    size = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    assert size < 640 * 1024  # far below a megabyte (HDF5 files alone take 25 kB each)


def test_no_mutant_escapes_hangs_blows_up_or_crashes(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    report = run_campaign(Settings(files=FILES, campaign=0, workers=2, timeout=20, keep=kept))
    assert report.runs == FILES * len(OPS)
    assert report.outcomes["error"] > 0 and report.outcomes["ok"] > 0  # mutants of both kinds
    if report.bad:
        shown = json.dumps(report.failures[:10], indent=1)
        pytest.fail(f"{report.table()}\nkept in {kept}\n{shown}")


def test_an_operation_that_fails_is_an_expcli_error_naming_the_file(tmp_path: Path) -> None:
    """What the campaign counts as clean: the library's own errors, each naming the file."""
    broken = tmp_path / "cartpole.npz"
    broken.write_bytes((CORPUS / "cartpole.npz").read_bytes()[:-100])
    with pytest.raises(ExpcliError) as info:
        load(broken)
    assert info.value.path == str(broken)


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


def test_no_folder_mutant_escapes_hangs_reads_outside_or_changes_the_folder(
    tmp_path: Path,
) -> None:
    report = run_campaign(Settings(files=FOLDERS, campaign=0, folders=True, timeout=20))
    assert report.runs == FOLDERS * len(FOLDER_OPS)
    assert report.outcomes["error"] > 0 and report.outcomes["ok"] > 0
    if report.bad:
        shown = json.dumps(report.failures[:10], indent=1)
        pytest.fail(f"{report.table()}\n{shown}")


def test_every_header_integer_at_an_edge_is_read_or_refused_in_one_line() -> None:
    """Each integer of every header of every seed (437 of them) set to an edge of 64 bits.

    ``header_ints``: ``written`` of 2**70 in a Parquet footer gave an ``OverflowError``
    traceback in ``inspect``; a LeRobot sidecar's tensor shape of 2**62 a numpy one.
    """
    fields = header_ints.fields()
    assert len({(f.seed, f.header) for f in fields}) >= 25  # every kind of header is there
    report = run_campaign(Settings(files=len(fields), header_ints=True, workers=2, timeout=20))
    assert report.outcomes["error"] > 0 and report.outcomes["ok"] > 0
    if report.bad:
        shown = json.dumps(report.failures[:10], indent=1)
        pytest.fail(f"{report.table()}\n{shown}")
