"""Lineage: each source's checksum is of its content, and a chain of edits reads back."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numpy as np

from expcli import load, save
from expcli.formats.dataset import Dataset
from expcli.formats.sharded import write as write_folder
from expcli.shaping.lineage import _digest, checksum_later
from expcli.shaping.verbs import filter_episodes
from expcli.spec import CircularState


def data(seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    tensors = {
        "rewards": rng.random((20, 2, 1), dtype=np.float32),
        "terminated": rng.random((20, 2, 1)) < 0.2,
        "truncated": np.zeros((20, 2, 1), dtype=bool),
    }
    return Dataset(tensors, CircularState(0, 0, True))


def test_checksums_follow_the_content(tmp_path: Path) -> None:
    h5 = save(data(0), tmp_path / "a.h5")
    source = checksum_later(h5, "hdf5").result(tmp_path / "out.npz")
    assert source["sha256"] == hashlib.sha256(h5.read_bytes()).hexdigest()
    assert source["checksum_of"] == "file" and source["bytes"] == h5.stat().st_size
    npz = [save(data(seed), tmp_path / f"{seed}.npz") for seed in (0, 0, 1)]
    digests = [checksum_later(p, "npz").result(tmp_path / "out.npz")["sha256"] for p in npz]
    assert digests[0] == digests[1] != digests[2]  # same tensors, same digest
    folders = []
    for seed in (0, 1):
        folder = tmp_path / f"dir{seed}"
        write_folder(data(seed), folder, overwrite=True)
        folders.append(checksum_later(folder, "folder").result(tmp_path / "out.npz"))
    assert folders[0]["checksum_of"] == "manifest"
    assert folders[0]["sha256"] != folders[1]["sha256"]


def test_a_stopped_checksum_ends_at_once(tmp_path: Path) -> None:
    """Ctrl-C stops the edit: the checksum thread must not read on (exit waits for it)."""
    path = tmp_path / "big.bin"
    path.write_bytes(b"\1" * (3 << 20))
    stop = threading.Event()
    assert _digest(path, stop) == hashlib.sha256(path.read_bytes()).hexdigest()
    stop.set()
    assert _digest(path, stop) == ""


def test_the_chain_of_edits_is_kept(tmp_path: Path) -> None:
    first = save(data(0), tmp_path / "a.npz")
    filter_episodes(first, tmp_path / "b.h5", where="length >= 1")
    filter_episodes(tmp_path / "b.h5", tmp_path / "c.npz", top="2")
    lineage = load(tmp_path / "c.npz").metadata["lineage"]
    assert [entry["verb"] for entry in lineage] == ["filter"]
    assert lineage[0]["arguments"]["top"] == "2"
    earlier = lineage[0]["sources"][0]["lineage"]
    assert earlier[0]["arguments"]["where"] == "length >= 1"
    assert earlier[0]["sources"][0]["path"] == "a.npz"  # relative to the output b.h5
    assert lineage[0]["kept"]["episodes"] == 2


def test_sources_are_named_relative_to_the_output_with_size_and_sha256(tmp_path: Path) -> None:
    runs, shared = tmp_path / "runs", tmp_path / "shared" / "v1"
    runs.mkdir()
    source = save(data(0), runs / "a.h5")
    filter_episodes(source, shared / "top.npz", top="2")
    [entry] = load(shared / "top.npz").metadata["lineage"]
    [recorded] = entry["sources"]
    assert recorded["path"] == "../../runs/a.h5" and recorded["path_is"] == "relative to the output"
    assert recorded["bytes"] == source.stat().st_size
    assert recorded["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert str(tmp_path) not in str(load(shared / "top.npz").metadata)  # no folder of ours


def test_absolute_paths_only_when_asked(tmp_path: Path) -> None:
    from expcli.shaping.verbs import merge, split

    a, b = save(data(0), tmp_path / "a.npz"), save(data(1), tmp_path / "b.npz")
    merge([a, b], tmp_path / "m.npz", lineage_paths="absolute")
    [entry] = load(tmp_path / "m.npz").metadata["lineage"]
    assert [s["path"] for s in entry["sources"]] == [str(a.resolve()), str(b.resolve())]
    split(a, [tmp_path / "out" / "t.npz", tmp_path / "v.npz"], incomplete="1")
    [entry] = load(tmp_path / "out" / "t.npz").metadata["lineage"]
    assert entry["sources"][0]["path"] == "../a.npz"
    assert entry["arguments"]["outputs"] == ["t.npz", "../v.npz"]
    assert entry["arguments"]["incomplete"] == "../v.npz"


def test_the_command_line_takes_lineage_paths_and_inspect_reads_old_absolute_ones(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from expcli.cli import app
    from expcli.formats import write_dataset

    source = save(data(0), tmp_path / "a.npz")
    out = tmp_path / "f.npz"
    args = ["filter", str(source), "--top", "2", "-o", str(out), "--lineage-paths", "absolute"]
    assert CliRunner().invoke(app, args).exit_code == 0
    assert load(out).metadata["lineage"][0]["sources"][0]["path"] == str(source.resolve())
    bad = CliRunner().invoke(app, [*args[:-1], "nowhere", "--overwrite"])
    assert bad.exit_code == 2 and "--lineage-paths 'nowhere'" in bad.stderr
    old = load(out)  # a file written before: absolute paths, no path_is
    del old.metadata["lineage"][0]["sources"][0]["path_is"]
    write_dataset(old, tmp_path / "old.npz")
    shown = CliRunner().invoke(app, ["inspect", str(tmp_path / "old.npz")], env={"COLUMNS": "300"})
    assert shown.exit_code == 0 and f"filter of {source.resolve()} (sha256" in shown.stdout
