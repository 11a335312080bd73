"""``--frames full|once`` on ``convert`` and ``collect``, and what ``inspect`` shows of the form."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from expcli import load
from expcli.cli.app import app
from expcli.formats import write_dataset
from tests.formats.test_frames import frame_dataset, same_bytes


def _run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, result.stderr + result.stdout
    return result.stdout + result.stderr


def _members(path: Path) -> list[str]:
    with np.load(path) as archive:
        return archive.files


def test_convert_frames_full_and_once(tmp_path: Path) -> None:
    dataset = frame_dataset(np.random.default_rng(0), 20, 2, 0.1)
    source = tmp_path / "source.h5"
    write_dataset(dataset, source)
    _run("convert", str(source), str(tmp_path / "full.npz"), "--frames", "full")
    _run("convert", str(source), str(tmp_path / "once.npz"))
    assert "next_observations" in _members(tmp_path / "full.npz")
    assert "next_observations" not in _members(tmp_path / "once.npz")
    for name in ("full.npz", "once.npz"):
        back = load(tmp_path / name).tensors["next_observations"]
        assert same_bytes(back, dataset.tensors["next_observations"])
    out = _run("convert", str(source), str(tmp_path / "x.npz"), "--frames", "twice", code=2)
    assert "twice" in out


def test_inspect_shows_the_bytes_saved(tmp_path: Path) -> None:
    path = tmp_path / "once.pt"
    write_dataset(frame_dataset(np.random.default_rng(1), 20, 2, 0.0), path)
    summary = json.loads(_run("inspect", str(path), "--json"))
    assert summary["frames"]["next_observations"]["kept"] == 2  # the newest row's two cells
    assert summary["frames"]["next_observations"]["saved_bytes"] == 40 * 64 - 2 * 72
    assert "stored once" in _run("inspect", str(path))


def test_collect_frames_full_and_once(tmp_path: Path) -> None:
    """A frame env's file: once stores next observations once, full every one, same data."""
    for frames in ("full", "once"):
        _run(
            "collect", "benchmarks.frame_env:ConstantFrame-v0", "--env-kwargs",
            '{"shape": [8, 8], "length": 7}', "--envs", "2", "--steps", "20", "--mode", "dummy",
            "--seed", "0", "--frames", frames, "-o", str(tmp_path / f"{frames}.npz"), "-q",
        )  # fmt: skip
    assert "next_observations" in _members(tmp_path / "full.npz")
    assert "next_observations" not in _members(tmp_path / "once.npz")
    full, once = load(tmp_path / "full.npz"), load(tmp_path / "once.npz")
    for name, expected in full.tensors.items():
        assert same_bytes(once.tensors[name], expected), name


def test_inspect_shows_the_bytes_a_parquet_folder_saved(tmp_path: Path) -> None:
    """No cell changed: each shard keeps its last row's 2 cells, the others are null."""
    source = write_dataset(frame_dataset(np.random.default_rng(2), 20, 2, 0.0), tmp_path / "d.npz")
    _run("convert", str(source), str(tmp_path / "f"), "--shard-format", "parquet")
    shards = len(json.loads((tmp_path / "f" / "manifest.json").read_text())["shards"])
    summary = json.loads(_run("inspect", str(tmp_path / "f"), "--json"))
    assert summary["frames"] == {
        "next_observations": {
            "form": "nulls",
            "kept": 2 * shards,
            "cells": 40,
            "saved_bytes": (40 - 2 * shards) * 64,
        }
    }
    assert "(nulls)" in _run("inspect", str(tmp_path / "f"))
    _run("convert", str(source), str(tmp_path / "w"), "--frames", "full")
    assert "frames" not in json.loads(_run("inspect", str(tmp_path / "w"), "--json"))
