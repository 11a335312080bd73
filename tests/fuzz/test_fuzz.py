"""The reader fuzzer in CI: seeded mutants of every format and layout through ``load``,
``inspect --json``, ``inspect --check`` and ``convert``, each in a child with a time and
memory limit. No traceback, no hang, no blow-up, no crash, no write beside the source.

The campaign is deterministic (its mutants follow from the seed); ``python -m
tests.fuzz.campaign --files N`` runs a longer one with the same code. Folders are fuzzed in
``test_fuzz_folders``, header integers in ``test_fuzz_header_ints``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from expcli import load
from expcli.errors import ExpcliError
from tests.format_catalogue import LAYOUT_FOLDERS, SUFFIXES
from tests.fuzz.campaign import OPS, Settings, run_campaign
from tests.fuzz.mutations import kind
from tests.fuzz.seeds import CORPUS, seeds

FILES = 600  # about 30 s on two cores; every seed file gets its share


def test_the_seed_corpus_covers_every_format_and_layout_and_is_small() -> None:
    corpus = seeds(CORPUS)
    folders = {layout for layout, _ in LAYOUT_FOLDERS}
    read_only = {"arrow"}  # table.arrow: Arrow IPC, which expcli reads and does not write
    assert {kind(seed) for seed in corpus} == {
        s.lstrip(".") for s in SUFFIXES
    } | folders | read_only
    layouts = set()
    for seed in corpus:
        with warnings.catch_warnings():  # table.parquet: read from its columns, and said
            warnings.simplefilter("ignore", UserWarning)
            dataset = load(seed)
        assert len(dataset) > 0, seed
        layout = dataset.metadata.get("layout")
        layouts.add(
            layout if isinstance(layout, str) else ("expcli" if dataset.metadata else "skrl")
        )
    assert layouts == {"expcli", "skrl", "tianshou", "minari", "d4rl", "lerobot", "table"}
    size = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    assert size < 640 * 1024  # far below a megabyte (HDF5 files alone take 25 kB each)


@pytest.mark.slow
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
