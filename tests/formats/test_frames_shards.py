"""Frames once in sharded folders: each npz shard over its own rows, read back bit for bit.

A shard's last row is always kept (its successor is the next shard's first row, which the
shard does not hold); readers (``load``, ``open_lazy`` slices and gathers across shard
boundaries) must give the bytes of the full form, and a collect run must go on (``--resume``)
from a folder of either form.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from expcli import load
from expcli.cli.app import app
from expcli.errors import SchemaError
from expcli.formats import sharded
from expcli.formats.dataset import Dataset
from expcli.formats.frames import PREFIX, encode
from expcli.formats.header import encode_header
from expcli.formats.npz_format import write_members
from expcli.spec import FRAMES_SCHEMA, SCHEMA, CircularState, FramesForm
from tests.formats.test_frames import check_lazy, frame_dataset, same_bytes


def shard_headers(folder: Path) -> list[dict[str, object]]:
    """Each listed shard's metadata object, in row order."""
    manifest = json.loads((folder / "manifest.json").read_text())
    out = []
    for entry in manifest["shards"]:
        with np.load(folder / entry["file"]) as members:
            out.append(json.loads(str(members["__expcli__"])))
    return out


_CASES = given(
    size=st.integers(1, 10),
    envs=st.integers(1, 3),
    changed=st.sampled_from([0.0, 0.1, 0.5]),
    leaves=st.booleans(),
    shard_rows=st.integers(1, 5),
    wrapped=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)


def folder_cases(test: Callable[..., None]) -> Callable[..., None]:
    """Run ``test`` on drawn frames and shard sizes: wraps, env columns, leaves, NaN payloads."""
    runs = settings(
        max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    return runs(_CASES(test))


def folder_case(
    size: int, envs: int, changed: float, leaves: bool, wrapped: bool, seed: int
) -> tuple[Dataset, np.random.Generator, int]:
    """The dataset of a ``FOLDER_CASES`` draw, its generator, and the bytes of one row."""
    rng = np.random.default_rng(seed)
    state = CircularState(int(rng.integers(0, size)), 0, filled=True) if wrapped else None
    dataset = frame_dataset(rng, size, envs, changed, leaves=leaves, state=state)
    return dataset, rng, sum(a[0].nbytes for a in dataset.tensors.values())


@folder_cases
def test_a_once_folder_reads_back_as_the_full_form(
    size: int, envs: int, changed: float, leaves: bool, shard_rows: int, wrapped: bool, seed: int
) -> None:
    dataset, rng, row_bytes = folder_case(size, envs, changed, leaves, wrapped, seed)
    with tempfile.TemporaryDirectory() as tmp:
        folders = {}
        for frames in ("once", "full"):
            folder = folders[frames] = Path(tmp) / frames
            sharded.write(
                dataset,
                folder,
                overwrite=False,
                shard_bytes=row_bytes * shard_rows,
                frames=FramesForm(frames),
            )
            back = load(folder)
            assert back.state == dataset.state
            for name, expected in dataset.tensors.items():
                assert same_bytes(back.tensors[name], expected), (frames, name)
            check_lazy(folder, dataset, rng)
        headers = shard_headers(folders["once"])
        sparse = [h for h in headers if "frames" in h]
        schema = json.loads((folders["once"] / "manifest.json").read_text())["schema"]
        assert schema == (FRAMES_SCHEMA if sparse else SCHEMA)
        assert all(h["schema"] == SCHEMA for h in shard_headers(folders["full"]))
        for header in sparse:
            forms = header["frames"]
            assert isinstance(forms, dict)
            assert all(form["wrap"] is False for form in forms.values())


def test_a_shard_keeps_its_last_row_even_when_the_next_shard_starts_with_it(
    tmp_path: Path,
) -> None:
    """No cell changed: each shard keeps only its last row; nothing wraps to its first."""
    dataset = frame_dataset(np.random.default_rng(0), 12, 2, 0.0)
    following = dataset.tensors["next_observations"]
    following[-1] = dataset.tensors["observations"][0]  # equal to row 0: still kept
    row_bytes = sum(a[0].nbytes for a in dataset.tensors.values())
    sharded.write(dataset, tmp_path / "f", overwrite=False, shard_bytes=row_bytes * 4)
    for index in range(3):
        with np.load(tmp_path / "f" / f"shard-{index:06d}.npz") as members:
            assert members[f"{PREFIX}next_observations/cells"].tolist() == [6, 7]
    assert same_bytes(load(tmp_path / "f").tensors["next_observations"], following)


def test_a_shard_saying_no_wrap_must_keep_its_last_row(tmp_path: Path) -> None:
    """A file whose last row was derived from row 0, relabelled ``"wrap": false``, is refused."""
    dataset = frame_dataset(np.random.default_rng(1), 6, 2, 0.0)
    dataset.tensors["next_observations"][-1] = dataset.tensors["observations"][0]
    path = tmp_path / "x.npz"
    members, header = encode(dataset.tensors, dataset.header(), "once", path)
    assert members[f"{PREFIX}next_observations/cells"].size == 0
    header["frames"]["next_observations"]["wrap"] = False
    with path.open("wb") as f:
        write_members(members, f, encode_header(header, path))
    with pytest.raises(SchemaError, match="last row"):
        load(path)


def test_a_manifest_of_an_unknown_schema_is_refused(tmp_path: Path) -> None:
    from expcli.errors import FormatError

    sharded.write(
        frame_dataset(np.random.default_rng(2), 4, 1, 0.0), tmp_path / "f", overwrite=False
    )
    manifest = tmp_path / "f" / "manifest.json"
    manifest.write_text(manifest.read_text().replace(FRAMES_SCHEMA, "expcli/3"))
    with pytest.raises(FormatError, match="expcli/3"):
        load(tmp_path / "f")


def _collect(*args: str) -> None:
    result = CliRunner().invoke(app, ["collect", *args, "-q"])
    assert result.exit_code == 0, result.stderr + result.stdout


@pytest.mark.parametrize(("first", "then"), [("full", "once"), ("once", "full")])
def test_resume_goes_on_in_either_form(tmp_path: Path, first: str, then: str) -> None:
    """Shards of both forms in one folder; every next observation is the env's."""
    folder = tmp_path / "run"
    _collect(
        "benchmarks.frame_env:NoisyFrames-v0", "--env-kwargs",
        '{"shape": [60, 70], "length": 7, "count": 5}', "--envs", "2", "--steps", "24",
        "--mode", "dummy", "--seed", "0", "--shard-size", "4", "--frames", first, "-o", str(folder),
    )  # fmt: skip
    rows = len(load(folder))
    _collect("--resume", str(folder), "--trust-settings", "--steps", "48", "--frames", then)
    forms = ["frames" in h for h in shard_headers(folder)]
    assert forms[0] == (first == "once") and forms[-1] == (then == "once")
    whole = load(folder)
    observations = whole.tensors["observations"]
    following = whole.tensors["next_observations"]
    ended = whole.tensors["terminated"] | whole.tensors["truncated"]
    ended = ended.reshape(ended.shape[:2])
    assert len(whole) == 2 * rows
    inside = ~ended[:-1]
    assert (following[:-1][inside] == observations[1:][inside]).all()
    assert (following[:-1][ended[:-1]] != observations[1:][ended[:-1]]).any(axis=(1, 2)).all()
