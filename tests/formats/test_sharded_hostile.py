"""A sharded folder from anyone: its manifest is parsed, never matched as bytes, every number in
it is checked against the shards, and only regular files inside the folder are opened."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import expcli
from expcli.errors import ExpcliError, FormatError, SchemaError
from expcli.formats import open_lazy
from expcli.formats.sharded import check_shards
from tests.fuzz.folders import FOLDER_SEED, snapshot
from tests.memory_probe import run_child

Edit = Callable[[dict[str, Any]], None]


def _folder(tmp_path: Path, edit: Edit | None = None) -> Path:
    folder = tmp_path / "data"
    shutil.copytree(FOLDER_SEED, folder)
    if edit is not None:
        manifest = json.loads((folder / "manifest.json").read_text())
        edit(manifest)
        (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return folder


def _manifest(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "manifest.json").read_text()))


@pytest.mark.parametrize("layout", ["compact", "reordered"])
def test_a_manifest_written_compactly_or_reordered_is_the_same_folder(
    tmp_path: Path, layout: str
) -> None:
    folder = _folder(tmp_path)
    want = expcli.load(folder)
    manifest = _manifest(folder)
    if layout == "reordered":
        manifest = dict(reversed(list(manifest.items())))
    (folder / "manifest.json").write_text(json.dumps(manifest, separators=(",", ":")))
    got = expcli.load(folder)
    for name, array in want.tensors.items():
        np.testing.assert_array_equal(got.tensors[name], array)


def _drop_rewards(manifest: dict[str, Any]) -> None:
    del manifest["tensors"]["rewards"]


def _rows(value: Any) -> Edit:
    """Shard 0 said to hold ``value`` rows, and ``memory_size`` agreeing."""

    def edit(manifest: dict[str, Any]) -> None:
        manifest["shards"][0]["rows"] = value
        manifest["memory_size"] = value + sum(e["rows"] for e in manifest["shards"][1:])

    return edit


def _twice(manifest: dict[str, Any]) -> None:
    manifest["shards"].append(dict(manifest["shards"][0]))
    manifest["memory_size"] += manifest["shards"][0]["rows"]


EDITS: dict[str, Edit] = {
    "rows 0": _rows(0),
    "num_envs 0": lambda m: m.update(num_envs=0),
    "tensor removed": _drop_rewards,
    "num_envs 1e12": lambda m: m.update(num_envs=10**12),
    "rows 2**63": _rows(2**63),
    "rows 1e300": _rows(1e300),
    "name too long": lambda m: m["shards"][0].update(file="shard-" + "0" * 300 + ".npz"),
    "listed twice": _twice,
    "schema": lambda m: m.update(schema="expcli/9"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_manifest_that_disagrees_with_its_shards_is_refused_by_load_and_check(
    tmp_path: Path, edit: str
) -> None:
    folder = _folder(tmp_path, EDITS[edit])
    before = snapshot(folder)
    with pytest.raises(ExpcliError) as info:
        expcli.load(folder)
    assert str(folder) in str(info.value)
    with pytest.raises(ExpcliError):
        open_lazy(folder)
    run = run_child(["-m", "expcli", "inspect", str(folder), "--check"], timeout=60)
    assert run.returncode == 1, run.stdout[-2000:]
    assert "Traceback" not in run.stderr
    assert snapshot(folder) == before


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    key=st.sampled_from(["num_envs", "memory_size", "rows", "bytes", "shape"]),
    value=st.one_of(
        st.integers(-(2**70), 2**70),
        st.sampled_from([0, 1, 2, 3, 2**31, 2**63 - 1, 2**63, 2**64]),
        st.floats(allow_nan=True),
        st.booleans(),
    ),
)
def test_a_number_at_any_edge_is_read_exactly_or_refused(key: str, value: Any) -> None:
    """Only the true counts read; any other number is an expcli error naming the folder."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        folder = _folder(Path(tmp))
        manifest = _manifest(folder)
        truth = {
            "num_envs": manifest["num_envs"],
            "memory_size": manifest["memory_size"],
            "rows": manifest["shards"][0]["rows"],
            "bytes": manifest["shards"][0]["bytes"],
            "shape": manifest["tensors"]["observations"]["shape"][0],
        }[key]
        if key == "rows":
            _rows(value)(manifest)
        elif key == "bytes":
            manifest["shards"][0][key] = value
        elif key == "shape":
            manifest["tensors"]["observations"]["shape"] = [value]
        else:
            manifest[key] = value
        (folder / "manifest.json").write_text(json.dumps(manifest))
        if type(value) is int and value == truth:
            assert expcli.load(folder).memory_size == 4
            return
        with pytest.raises(ExpcliError) as info:
            expcli.load(folder)
        assert str(folder) in str(info.value)


def test_a_shard_name_too_long_for_the_file_system_is_an_expcli_error(tmp_path: Path) -> None:
    folder = _folder(tmp_path, EDITS["name too long"])
    with pytest.raises(FormatError) as info:
        expcli.load(folder)
    assert info.value.key == "shards"


@pytest.mark.parametrize("target", ["manifest.json", "shard-000001.npz"])
@pytest.mark.parametrize("kind", ["outside", "dev zero"])
def test_a_link_in_place_of_a_file_is_refused_without_reading_it(
    tmp_path: Path, target: str, kind: str
) -> None:
    folder = _folder(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copyfile(folder / target, outside / target)  # a file the manifest agrees with
    (folder / target).unlink()
    (folder / target).symlink_to("/dev/zero" if kind == "dev zero" else outside / target)
    if kind == "outside":
        info = os.stat(outside / target)
        os.utime(outside / target, ns=(info.st_mtime_ns - 10**12, info.st_mtime_ns))
        atime = os.stat(outside / target).st_atime_ns
    with pytest.raises(FormatError, match="symbolic link") as error:
        expcli.load(folder)
    assert error.value.path == str(folder / target)
    if target != "manifest.json":
        assert any("symbolic link" in p for p in check_shards(folder))
    if kind == "outside":
        assert os.stat(outside / target).st_atime_ns == atime  # never opened


@pytest.mark.parametrize("target", ["manifest.json", "shard-000000.npz"])
def test_a_named_pipe_in_place_of_a_file_is_refused_at_once(tmp_path: Path, target: str) -> None:
    folder = _folder(tmp_path)
    (folder / target).unlink()
    os.mkfifo(folder / target)
    for args in (["inspect", str(folder), "--check"], ["convert", str(folder), "x.npz"]):
        run = run_child(["-m", "expcli", *args], timeout=30)
        assert not run.timed_out, args
        assert run.returncode == 1 and "named pipe" in run.stdout + run.stderr
        assert "Traceback" not in run.stderr


def test_a_shard_listed_as_missing_a_tensor_it_holds_is_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path, lambda m: m["shards"][0].update(missing=["rewards"]))
    with pytest.raises(SchemaError) as info:
        expcli.load(folder)
    assert info.value.key == "rewards"


def test_a_lock_file_and_stray_files_beside_the_shards_are_ignored(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / ".lock").write_text("4242 host\n")
    shutil.copyfile(folder / "shard-000000.npz", folder / "shard-000009.npz")
    assert expcli.load(folder).memory_size == 4
    assert check_shards(folder) == []


def test_a_shard_read_on_its_own_that_is_a_named_pipe_is_refused_at_once(tmp_path: Path) -> None:
    """As ``collect --resume`` reads the last shard: a pipe there hung it for good."""
    folder = _folder(tmp_path)
    (folder / "shard-000001.npz").unlink()
    os.mkfifo(folder / "shard-000001.npz")
    code = (
        "from pathlib import Path\nfrom expcli.formats.npz_format import read\n"
        f"read(Path({str(folder / 'shard-000001.npz')!r}))"
    )
    run = run_child(["-c", code], timeout=30)
    assert not run.timed_out
    assert "FormatError" in run.stderr and "named pipe" in run.stderr
