"""Sampling a dataset whose next observations are stored once (issue 27): frame stacks,
slices and ``inspect --check`` see the same bytes as from the full form, in every native
format and in folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import ReplayBuffer, SliceSampler
from expcli.cli.app import app
from expcli.formats import sharded, write_dataset
from expcli.formats.dataset import Dataset
from tests.format_catalogue import SHARD_FORMATS, frames_once, suffix_of
from tests.formats.test_frames import frame_dataset, same_bytes

TARGETS = [
    *(suffix_of(fmt) for fmt in frames_once()),
    *(f"folder-{shards}" for shards in SHARD_FORMATS),
]
"""Every file format that stores next observations once, and a folder of each shard format."""


def episodes(rng: np.random.Generator) -> Dataset:
    """Frames and vectors in episodes: next observations are the next rows' but at the ends,
    where they are the episodes' own last ones."""
    dataset = frame_dataset(rng, 30, 3, 0.0, leaves=True)
    ends = rng.random((30, 3, 1)) < 0.15
    for name in ("next_observations/pixels", "next_observations/vector"):
        following = dataset.tensors[name]
        following[ends[..., 0]] = rng.permutation(following[ends[..., 0]])[::-1] + 1
    dataset.tensors["terminated"], dataset.tensors["truncated"] = ends, np.zeros_like(ends)
    dataset.tensors["rewards"] = rng.random((30, 3, 1), dtype=np.float32)
    return dataset


def written(dataset: Dataset, folder: Path, target: str, frames: str) -> Path:
    path = folder / f"{frames}{target if target.startswith('.') else ''}"
    if target.startswith("folder"):
        shards = target.removeprefix("folder-")
        sharded.write(dataset, path, overwrite=False, shard_bytes=8192, shard_format=shards)
        if frames == "full":  # a folder of the full form, as written before issue 27
            path.rename(folder / "unused")
            sharded.write(
                dataset, path, overwrite=False, shard_bytes=8192, shard_format=shards,
                frames="full",
            )  # fmt: skip
        return path
    write_dataset(dataset, path, frames=frames)
    return path


@pytest.mark.parametrize("target", TARGETS)
def test_stacks_slices_and_checks_are_those_of_the_full_form(tmp_path: Path, target: str) -> None:
    if "parquet" in target:
        pytest.importorskip("pyarrow.parquet", reason="pyarrow cannot be installed on this Python")
    dataset = episodes(np.random.default_rng(3))
    paths = {frames: written(dataset, tmp_path, target, frames) for frames in ("once", "full")}
    batches = {}
    for frames, path in paths.items():
        stacked = ReplayBuffer(str(path), batch_size=64, seed=0, stack_num=3)
        sliced = ReplayBuffer(str(path), sampler=SliceSampler(slice_len=4), batch_size=32, seed=1)
        batches[frames] = (stacked.sample(return_info=True), sliced.sample(return_info=True))
    for (once, once_info), (full, full_info) in zip(*batches.values(), strict=True):
        assert np.array_equal(once_info["index"], full_info["index"])
        assert sorted(once) == sorted(full)
        for name, tensor in full.items():
            assert same_bytes(once[name].numpy(), tensor.numpy()), name  # NaN payloads too
    checks = {}
    for frames, path in paths.items():
        result = CliRunner().invoke(app, ["inspect", "--check", "--json", str(path)])
        assert result.exit_code == 1, result.stdout + result.stderr  # the NaN vectors
        checks[frames] = json.loads(result.stdout)["checks"]
    assert checks["once"] == checks["full"]
    assert {c["check"]: c["status"] for c in checks["once"]}["continuity"] == "passed"
