"""HDF5 files that made a reader hang, blow up or escape: each read in a child, with a limit.

A damaged global heap (where HDF5 keeps variable-length strings: expcli's metadata, D4RL's
metadata strings, tianshou's type tags) made HDF5 loop forever or allocate gigabytes; an
attribute may declare billions of values; a Minari episode may declare a billion rows it
never stored; a tag may be 60,000 characters that end up in a message.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import h5py
import numpy as np
import pytest

from expcli.errors import FormatError
from expcli.formats import Dataset, write_dataset
from expcli.formats.layouts import write_layout
from expcli.spec import CircularState
from tests.memory_probe import run_child

# Writing lossy datasets in foreign layouts on purpose: their one-line warning of what the
# layout does not keep is tested in tests/formats/layouts/test_layout_losses.py.
pytestmark = pytest.mark.filterwarnings("ignore:.*layout does not keep:UserWarning")


def dataset() -> Dataset:
    rng = np.random.default_rng(0)
    observations = rng.normal(size=(8, 1, 3)).astype(np.float32)
    return Dataset(
        {
            "observations": observations,
            "next_observations": np.roll(observations, -1, axis=0),
            "actions": rng.integers(0, 2, size=(8, 1, 1)),
            "rewards": np.ones((8, 1, 1), np.float32),
            "terminated": np.eye(8, 1, 3, dtype=bool)[:, :, None],
        },
        CircularState(0, 0, True),
        {"env_id": "Toy-v0"},
    )


def break_global_heap(path: Path, how: str) -> None:
    """Damage the file's first global heap collection as the fuzzer did.

    ``loop``: a free-space object of size zero after the first object (HDF5 then never
    moves on); ``huge``: the collection claims 4 GiB.
    """
    data = bytearray(path.read_bytes())
    start = data.index(b"GCOL")
    if how == "huge":
        data[start + 8 : start + 16] = struct.pack("<Q", 0xFFFFFFF0)
    else:
        size = struct.unpack_from("<Q", data, start + 24)[0]  # object 1's size
        after = start + 16 + 16 + (size + 7) // 8 * 8
        data[after : after + 16] = bytes(16)  # object 0 (free space) of size 0
    path.write_bytes(bytes(data))


def load_in_child(path: Path, timeout: float = 60) -> tuple[str, float]:
    code = f"""
import expcli
from expcli.errors import FormatError
try:
    expcli.load({str(path)!r})
except FormatError as e:
    print("FormatError:", e)
"""
    run = run_child(["-c", code], timeout=timeout)
    assert not run.timed_out, f"reading {path.name} hung"
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, run.peak_mb


@pytest.mark.parametrize("how", ["loop", "huge"])
def test_a_damaged_heap_under_the_metadata_attribute_is_refused(tmp_path: Path, how: str) -> None:
    path = write_dataset(dataset(), tmp_path / "x.h5")
    break_global_heap(path, how)
    out, peak = load_in_child(path)
    assert out.startswith("FormatError:") and "'expcli'" in out and "global heap" in out
    assert peak < 500


def test_a_damaged_heap_under_d4rl_metadata_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d4rl.h5"
    write_layout(dataset(), path, "d4rl", overwrite=False)
    break_global_heap(path, "loop")
    out, peak = load_in_child(path)
    assert out.startswith("FormatError:") and "'metadata/expcli'" in out
    assert peak < 500


def test_an_attribute_declaring_a_huge_dataspace_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ts.h5"
    write_layout(dataset(), path, "tianshou", overwrite=False)
    with h5py.File(path, "r+") as h5:
        h5.attrs["maxsize"] = np.arange(4, dtype=np.int64)  # then claim 2**40 of them
    data = bytearray(path.read_bytes())
    name = data.index(b"maxsize\0")
    message = name - 8  # a version 1 attribute message: 8 bytes, then its name
    name_size, type_size = struct.unpack_from("<HH", data, message + 2)
    space = message + 8 + (name_size + 7) // 8 * 8 + (type_size + 7) // 8 * 8
    assert data[space] == 1 and data[space + 1] == 1  # dataspace version 1, one dimension
    data[space + 8 : space + 16] = struct.pack("<Q", 2**40)  # its size
    if data[space + 2] & 1:  # and its maximum size, when given
        data[space + 16 : space + 24] = struct.pack("<Q", 2**40)
    path.write_bytes(bytes(data))
    out, peak = load_in_child(path)  # HDF5 itself finds the message too short for it
    assert out.startswith("FormatError:") and "corrupt" in out
    assert peak < 500


def test_a_huge_type_tag_is_cut_short_in_the_message(tmp_path: Path) -> None:
    path = tmp_path / "ts.h5"
    write_layout(dataset(), path, "tianshou", overwrite=False)
    with h5py.File(path, "r+") as h5:
        h5["_meta/obs"].attrs["__data_type__"] = "x" * 60_000
    run = run_child(["-m", "expcli", "inspect", str(path)], timeout=60)
    assert run.returncode == 1 and len(run.lines) == 1, run.stderr[-500:]
    assert "stored pickled" in run.stderr and len(run.stderr) < 500


def test_a_minari_episode_declaring_rows_it_never_stored_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "minari-v0"
    write_layout(dataset(), folder, "minari", overwrite=False)
    with h5py.File(folder / "data" / "main_data.hdf5", "r+") as h5:
        del h5["episode_0/actions"]
        h5.create_dataset("episode_0/actions", shape=(10**9,), dtype="f4", chunks=True)
    out, peak = load_in_child(folder)
    assert out.startswith("FormatError:") and "episode_0/actions" in out
    assert peak < 500


def test_a_minari_episode_that_is_not_a_group_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "minari-v0"
    write_layout(dataset(), folder, "minari", overwrite=False)
    with h5py.File(folder / "data" / "main_data.hdf5", "r+") as h5:
        del h5["episode_0"]
        h5["episode_0"] = np.arange(3)
    run = run_child(["-m", "expcli", "inspect", str(folder), "--check"])
    assert run.returncode == 1 and run.lines == [run.stderr.strip()], run.stderr[-800:]
    assert "'episode_0': is not a group" in run.stderr


def test_a_name_that_is_not_utf8_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    folder = tmp_path / "minari-v0"
    write_layout(dataset(), folder, "minari", overwrite=False)
    with h5py.File(folder / "data" / "main_data.hdf5", "r+") as h5:
        h5.create_dataset(b"\xff\xfe", data=np.arange(3))
    for args in (["inspect", str(folder), "--check"], ["inspect", str(folder), "--json"]):
        run = run_child(["-m", "expcli", *args])
        assert run.returncode in (0, 1) and "Traceback" not in run.stderr, run.stderr[-800:]
        assert len(run.lines) <= 1


def test_a_d4rl_metadata_string_that_is_deep_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d4rl.h5"
    write_layout(dataset(), path, "d4rl", overwrite=False)
    with h5py.File(path, "r+") as h5:
        del h5["metadata/expcli"]
        h5["metadata/expcli"] = json.dumps({"x": 0}).replace("0", "[" * 900 + "]" * 900)
    with pytest.raises(FormatError, match="nested"):
        from expcli import load

        load(path)


def test_the_heap_check_passes_what_h5py_writes(tmp_path: Path) -> None:
    """Attributes and scalars of every kind h5py writes read back unchanged."""
    from expcli import load

    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as h5:
        h5["observations"] = np.zeros((4, 2), np.float32)
        h5["actions"] = np.zeros((4, 1), np.float32)
        h5["rewards"] = np.arange(4, dtype=np.float32)
        h5["terminals"] = np.array([0, 1, 0, 1], dtype=bool)
        h5["metadata/name"] = "é" * 5000  # a string longer than a heap's first 4 kB
        h5["metadata/empty"] = ""
        h5["metadata/count"] = 7
    loaded = load(path)
    assert loaded.metadata["d4rl"]["metadata"] == {"name": "é" * 5000, "empty": "", "count": 7}
