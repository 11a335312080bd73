"""Every layout and storage of the table says what it cannot keep, in one warning line and
in the written metadata (issue 42: Minari's hdf5 storage dropped the env columns silently).

Each pair is written from a dataset it keeps whole and from one it cannot (two env columns,
wrapped, an extra tensor, float32 rewards, metadata), read back and compared: a warning
exactly when something differs."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from expcli import load
from expcli.formats import Dataset
from expcli.formats.layouts import LOSSES_KEY, Layout, write_layout
from expcli.formats.table import format_named, layouts_in_order
from expcli.spec import CircularState

PAIRS = [
    (row, storage)
    for row in layouts_in_order()
    if row.name is not Layout.EXPCLI
    for storage in (row.formats or row.storages)
]


def episodes(steps: int, envs: int, state: CircularState, **extra: Any) -> Dataset:
    """Episodes of 5 steps whose next observations are the next rows' observations."""
    rng = np.random.default_rng(0)
    chain = rng.normal(size=(steps + 1, envs, 3)).astype(np.float32)
    done = np.zeros((steps, envs, 1), bool)
    done[4::5] = True
    tensors = {
        "observations": chain[:-1],
        "next_observations": chain[1:].copy(),
        "actions": rng.integers(0, 2, (steps, envs, 1)),
        "rewards": np.ones((steps, envs, 1), np.float64),
        "terminated": done,
        "truncated": np.zeros((steps, envs, 1), bool),
        **extra,
    }
    return Dataset(tensors, state)


def lossless() -> Dataset:
    return episodes(20, 1, CircularState(0, 0, True))


def lossy() -> Dataset:
    dataset = episodes(
        20,
        2,
        CircularState(5, 0, True),
        log_prob=np.linspace(-1, 0, 40).reshape(20, 2, 1),  # float64: no CSV keeps it
    )
    dataset.tensors["rewards"] = dataset.tensors["rewards"].astype(np.float32)
    dataset.metadata.update({"env_id": "Toy-v0", "seed": 3})
    return dataset


def differences(original: Dataset, back: Dataset) -> list[str]:
    found = []
    for name, array in original.tensors.items():
        got = back.tensors.get(name)
        if got is None:
            found.append(f"{name} missing")
            continue
        got = np.asarray(got)
        if got.shape != array.shape or got.dtype != array.dtype:
            found.append(f"{name} {array.shape} {array.dtype} -> {got.shape} {got.dtype}")
        elif not np.array_equal(got, array):
            found.append(f"{name} values")
    same = ("memory_index", "env_index", "filled")
    if [getattr(back.state, k) for k in same] != [getattr(original.state, k) for k in same]:
        found.append(f"state {original.state} -> {back.state}")
    found += [f"metadata {key}" for key in original.metadata if key not in back.metadata]
    return found


@pytest.mark.parametrize(("row", "storage"), PAIRS, ids=[f"{r.name}-{s}" for r, s in PAIRS])
@pytest.mark.parametrize("make", [lossless, lossy])
def test_a_layout_warns_once_and_records_exactly_what_it_loses(
    tmp_path: Path, row: Any, storage: str, make: Any
) -> None:
    if storage == "video":
        pytest.skip("video keeps images only: tests/formats/layouts/test_lerobot_video.py")
    dataset = make()
    named = format_named(storage)
    suffix = named.suffixes[0] if row.formats and named is not None else ""
    target = tmp_path / (f"out{suffix}" if suffix else "out-v0")  # a Minari id
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        write_layout(dataset, target, row.name, overwrite=False, format=storage)
    said = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    back = load(target)
    lost = differences(dataset, back)
    assert bool(said) == bool(lost), (said, lost)
    if said:
        [line] = said
        assert "\n" not in line and f"the {row.name} layout does not keep" in line
        if row.keeps_metadata:
            assert back.metadata.get(LOSSES_KEY), back.metadata
        else:
            assert "keep no metadata: this line is the only record" in line


def test_convert_to_minari_hdf5_says_it_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from expcli.cli import app
    from expcli.formats import write_dataset

    source = write_dataset(lossy(), tmp_path / "run.h5")
    args = ["convert", str(source), str(tmp_path / "minari-demo-v0"), "--layout", "minari"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("warning: ") and "does not keep the 2 env column(s)" in line
    assert "log_prob" in line and load(tmp_path / "minari-demo-v0").metadata[LOSSES_KEY]
