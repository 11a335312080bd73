"""``expcli sample`` of image batches: a summary per tensor, not thousands of lines."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from expcli.cli import app
from expcli.formats import Dataset, write_dataset
from expcli.replay import RandomSampler, ReplayBuffer
from expcli.spec import CircularState


def test_image_batches_are_summarised_and_small_tensors_printed(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    tensors = {
        "observations": rng.integers(0, 256, (30, 2, 84, 84), dtype=np.uint8),
        "actions": rng.integers(0, 6, (30, 2, 1)),
    }
    path = write_dataset(Dataset(tensors, CircularState(0, 0, True)), tmp_path / "img.npz")
    args = ["sample", str(path), "--batch-size", "16", "--seed", "2", "--rows", "3"]
    env = {"NO_COLOR": "1", "COLUMNS": "120"}
    text = CliRunner().invoke(app, args, env=env)
    assert text.exit_code == 0, text.output
    assert len(text.stdout.splitlines()) < 20
    batch = ReplayBuffer(path, sampler=RandomSampler(), seed=2).sample(16)
    images = batch["observations"].numpy()
    assert "7,056 values per row" in text.stdout
    assert f"max {images.max():.4g}" in text.stdout and f"mean {images.mean():.4g}" in text.stdout
    report = json.loads(CliRunner().invoke(app, [*args, "--json"], env=env).stdout)
    summary = report["tensors"]["observations"]["summary"]
    assert "first" not in report["tensors"]["observations"]
    assert summary == {
        "values_per_row": 7056,
        "min": float(images.min()),
        "max": float(images.max()),
        "mean": float(images.astype(np.float64).mean()),
    }
    assert report["tensors"]["actions"]["first"] == batch["actions"][:3].tolist()
