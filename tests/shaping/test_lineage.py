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
    source = checksum_later(h5, "hdf5").result()
    assert source["sha256"] == hashlib.sha256(h5.read_bytes()).hexdigest()
    assert source["checksum_of"] == "file" and source["bytes"] == h5.stat().st_size
    npz = [save(data(seed), tmp_path / f"{seed}.npz") for seed in (0, 0, 1)]
    digests = [checksum_later(p, "npz").result()["sha256"] for p in npz]
    assert digests[0] == digests[1] != digests[2]  # same tensors, same digest
    folders = []
    for seed in (0, 1):
        folder = tmp_path / f"dir{seed}"
        write_folder(data(seed), folder, overwrite=True)
        folders.append(checksum_later(folder, "folder").result())
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
    assert earlier[0]["sources"][0]["path"] == str(first.resolve())
    assert lineage[0]["kept"]["episodes"] == 2
