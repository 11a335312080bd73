"""HDF5: lossless round trips, chunked layout, streaming rows, and damaged or hostile files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.errors import ConfigError, FormatError, SchemaError
from expcli.formats import Dataset, hdf5_format, read_dataset, write_dataset
from expcli.formats.hdf5_format import CHUNK_BYTES, Hdf5Reader, Hdf5Writer, chunk_shape
from expcli.spec import CircularState
from tests.format_catalogue import COMPRESSIONS, FILE_FORMATS, OTHER_COMPRESSIONS
from tests.formats.test_corrupt import sample
from tests.formats.test_roundtrip import assert_same_dataset, datasets

CODECS = [None, *(codec for fmt, codec in COMPRESSIONS if fmt == "hdf5")]
"""HDF5's compressions, and None: its default."""


def rewrite(path: Path, change: Callable[[h5py.File], object]) -> None:
    """Edit a written file in place with h5py."""
    with h5py.File(path, "r+") as f:
        change(f)


def header_of(path: Path) -> dict[str, Any]:
    with h5py.File(path, "r") as f:
        return dict(json.loads(f.attrs["expcli"]))


def set_header(f: h5py.File, header: dict[str, Any]) -> None:
    f.attrs["expcli"] = json.dumps(header)


# Round trips


@settings(max_examples=60, deadline=None)
@given(dataset=datasets(), compression=st.sampled_from(CODECS))
def test_round_trip_is_lossless(dataset: Dataset, compression: str | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write_dataset(dataset, Path(folder) / "data.h5", compression=compression)
        assert_same_dataset(dataset, read_dataset(path))


@settings(max_examples=25, deadline=None)
@given(dataset=datasets(), other=st.sampled_from([f for f in FILE_FORMATS if f != "hdf5"]))
def test_hdf5_converts_to_and_from_every_format(dataset: Dataset, other: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        there = read_dataset(write_dataset(dataset, Path(folder) / f"a.{other}"))
        back = read_dataset(write_dataset(there, Path(folder) / "b.hdf5", compression="lzf"))
        assert_same_dataset(dataset, back)
        again = read_dataset(write_dataset(back, Path(folder) / f"c.{other}"))
        assert_same_dataset(dataset, again)


def test_special_floats_and_big_metadata_survive(tmp_path: Path) -> None:
    bits = np.array([0x7FF8_0000_0000_0001, 0xFFF0_0000_0000_0000, 0x8000_0000_0000_0000, 1])
    dataset = Dataset(
        {
            "f64": bits.view(np.float64).reshape(4, 1),
            "f16": np.array([0x7C01, 0xFC00, 0x8000, 0x0001], np.uint16).view(np.float16)[:, None],
        },
        CircularState(2, 0, True),
        {"created": "now", "env_spec": "x" * 200_000},  # beyond HDF5's 64 KiB attribute limit
    )
    for compression in (codec for fmt, codec in OTHER_COMPRESSIONS if fmt == "hdf5"):
        path = write_dataset(dataset, tmp_path / f"{compression}.h5", compression=compression)
        assert_same_dataset(dataset, read_dataset(path))


# Layout


def test_layout_chunks_groups_bool_and_root_attribute(tmp_path: Path) -> None:
    dataset = Dataset(
        {
            "observations": np.zeros((300_000, 4, 3), np.float32),
            "infos/lives": np.ones((300_000, 4), np.int8),
            "terminated": np.zeros((300_000, 4), bool),
        },
        CircularState(5, 2, True),
        {"env_id": "CartPole-v1"},
    )
    path = write_dataset(dataset, tmp_path / "d.h5", compression="gzip")
    with h5py.File(path, "r") as f:
        obs = f["observations"]
        assert obs.chunks == (CHUNK_BYTES // 48, 4, 3)
        assert obs.compression == "gzip" and obs.dtype == np.float32
        assert isinstance(f["infos"], h5py.Group) and f["infos/lives"].dtype == np.int8
        assert f["terminated"].id.get_type().get_class() == h5py.h5t.ENUM
        assert f["terminated"].dtype == np.bool_
        for name in ("observations", "infos/lives", "terminated"):
            chunk_bytes = np.prod(f[name].chunks) * f[name].dtype.itemsize
            assert CHUNK_BYTES // 2 < chunk_bytes <= CHUNK_BYTES
        header = json.loads(f.attrs["expcli"])
    assert header["schema"] == "expcli/1" and header["env_id"] == "CartPole-v1"
    assert header["tensors"]["infos/lives"] == {"dtype": "int8", "shape": []}
    assert (header["memory_index"], header["env_index"], header["filled"]) == (5, 2, True)
    assert sorted(read_dataset(path).tensors) == ["infos/lives", "observations", "terminated"]


@pytest.mark.parametrize(
    ("shape", "itemsize", "expected"),
    [
        ((3, 2), 8, (3, 2)),  # small: one chunk
        ((10**6, 4, 3), 4, (21845, 4, 3)),  # whole rows of about 1 MiB
        ((100, 64, 84, 84, 3), 1, (6, 1, 84, 84, 3)),  # frames: one env column, ~128 KiB
        ((10**4, 8, 84, 84), 1, (18, 1, 84, 84)),
        ((1000, 8, 256), 4, (128, 1, 256)),  # cells of 1 KiB: by column
        ((1000, 8, 1023), 1, (128, 8, 1023)),  # smaller cells: whole rows of about 1 MiB
        ((1000, 100, 200), 4, (13, 100, 200)),  # cells of 800 B
        ((10, 1, 2048, 1024), 1, (1, 1, 1024, 1024)),  # one item beyond 1 MiB
        ((0, 3), 4, None),  # empty: contiguous
        ((5, 0, 2), 4, None),
    ],
)
def test_chunk_shape(shape: tuple[int, ...], itemsize: int, expected: object) -> None:
    assert chunk_shape(shape, itemsize) == expected


def test_empty_tensors_are_contiguous(tmp_path: Path) -> None:
    dataset = Dataset({"a": np.zeros((0, 2, 3), np.float16), "b": np.zeros((0, 2), bool)})
    path = write_dataset(dataset, tmp_path / "e.h5", compression="gzip")
    with h5py.File(path, "r") as f:
        assert f["a"].chunks is None and f["a"].shape == (0, 2, 3)
    assert_same_dataset(dataset, read_dataset(path))


# Options and names


def test_compression_option(tmp_path: Path) -> None:
    for name in ("zstd", "bogus"):  # Parquet's own, and nobody's
        with pytest.raises(
            ConfigError, match=f"HDF5 files take compression none, gzip, lzf; got '{name}'"
        ):
            write_dataset(sample(), tmp_path / "x.h5", compression=name)
    with pytest.raises(ConfigError, match="npz files cannot be compressed"):
        write_dataset(sample(), tmp_path / "x.npz", compression="gzip")
    assert list(tmp_path.iterdir()) == []
    write_dataset(sample(), tmp_path / "x.npz", compression="none")
    path = write_dataset(sample(), tmp_path / "x.h5", compression="LZF")
    with h5py.File(path, "r") as f:
        assert f["observations"].compression == "lzf"


@pytest.mark.parametrize(
    ("names", "key"),
    [(["a", "a/b"], "a/b"), (["/a"], "/a"), (["a//b"], "a//b"), (["a/"], "a/"), (["."], ".")],
)
def test_names_that_cannot_be_hdf5_paths(tmp_path: Path, names: list[str], key: str) -> None:
    dataset = Dataset({name: np.zeros((2, 1)) for name in names})
    with pytest.raises(SchemaError) as info:
        write_dataset(dataset, tmp_path / "n.h5")
    assert info.value.key == key and info.value.path == str(tmp_path / "n.h5")
    assert list(tmp_path.iterdir()) == []


# Streaming


def test_writer_and_reader_move_slices_of_rows(tmp_path: Path) -> None:
    dataset = sample()
    path = tmp_path / "s.h5"
    with Hdf5Writer(path, overwrite=False, compression="gzip") as writer:
        writer.create(dataset.header())
        for name, array in dataset.tensors.items():
            for start in range(0, len(array), 3):
                writer.write_rows(name, start, array[start : start + 3])
        assert not path.exists()
    with Hdf5Reader(path) as reader:
        assert [s.name for s in reader.specs] == ["actions", "observations", "terminated"]
        assert (reader.memory_size, reader.num_envs, reader.state) == (4, 2, dataset.state)
        assert reader.slab_rows("observations") >= 4
        for name, array in dataset.tensors.items():
            parts = [reader.read_rows(name, a, min(a + 3, 4)) for a in range(0, 4, 3)]
            np.testing.assert_array_equal(np.concatenate(parts), array)
        with pytest.raises(ValueError, match="outside"):
            reader.read_rows("actions", 2, 5)
        with pytest.raises(SchemaError):
            reader.read_rows("nope", 0, 1)
    assert_same_dataset(dataset, read_dataset(path))


def test_writer_refuses_wrong_rows_and_unwritten_rows(tmp_path: Path) -> None:
    dataset = sample()
    path = tmp_path / "w.h5"
    with pytest.raises(SchemaError, match="never written") as unwritten:
        with Hdf5Writer(path, overwrite=True) as writer:
            writer.create(dataset.header())
            with pytest.raises(SchemaError, match="expected int64") as info:
                writer.write_rows("actions", 0, np.zeros((1, 2, 1), np.int32))
            assert info.value.key == "actions"
            with pytest.raises(ValueError, match="outside"):
                writer.write_rows("actions", 3, np.zeros((2, 2, 1), np.int64))
    assert unwritten.value.key == "actions" and unwritten.value.path == str(path)
    with pytest.raises(SchemaError, match="never written"):
        with Hdf5Writer(path, overwrite=True) as writer:
            writer.create(dataset.header())
            writer.write_rows("actions", 0, dataset.tensors["actions"])
    assert list(tmp_path.iterdir()) == []


def test_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_dataset(sample(), tmp_path / "old.h5")
    before = path.read_bytes()
    original = h5py.Dataset.write_direct

    def write_then_fail(self: h5py.Dataset, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(h5py.Dataset, "write_direct", write_then_fail)
    with pytest.raises(KeyboardInterrupt):
        write_dataset(Dataset({"x": np.ones((9, 1))}), path)
    with pytest.raises(KeyboardInterrupt):
        write_dataset(Dataset({"x": np.ones((9, 1))}), tmp_path / "new.h5")
    assert sorted(os.listdir(tmp_path)) == ["old.h5"] and path.read_bytes() == before


def test_reading_and_writing_hdf5_never_loads_torch(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        import expcli.formats as f
        assert "h5py" not in sys.modules
        d = f.Dataset({{"x": np.zeros((2, 1, 3), np.float32)}})
        f.read_dataset(f.write_dataset(d, {str(tmp_path)!r} + "/a.h5"))
        assert "h5py" in sys.modules and "torch" not in sys.modules
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr


# Damaged and hostile files


@pytest.mark.parametrize("eighths", range(8))
def test_truncated_files(tmp_path: Path, eighths: int) -> None:
    path = write_dataset(sample(), tmp_path / "t.h5")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * eighths // 8])
    with pytest.raises(FormatError) as info:
        read_dataset(path)
    assert info.value.path == str(path) and str(path) in str(info.value)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"", "empty"),
        (b"\x89HDF\r\n\x1a\n" + bytes(200), "corrupt or truncated HDF5 file"),
        (bytes(range(256)) * 8, "not an HDF5 file .unrecognised content"),
    ],
)
def test_empty_and_garbage_files(tmp_path: Path, content: bytes, match: str) -> None:
    path = tmp_path / "g.h5"
    path.write_bytes(content)
    with pytest.raises(FormatError, match=match) as info:
        read_dataset(path, format="hdf5")
    assert info.value.path == str(path)


def replace_dataset(name: str, data: np.ndarray, **options: Any) -> Callable[[h5py.File], None]:
    def change(f: h5py.File) -> None:
        del f[name]
        f.create_dataset(name, data=data, **options)

    return change


@pytest.mark.parametrize(
    ("change", "error", "match", "key"),
    [
        (
            replace_dataset("actions", np.zeros((3, 2, 1), np.int64)),
            SchemaError,
            r"shape \(4, 2, 3\) disagrees with \(memory_size, num_envs\) = \(3, 2\)",
            "observations",
        ),
        (
            replace_dataset("actions", np.zeros((4, 2, 1), np.int32)),
            SchemaError,
            "stored as int32 .*the metadata says int64",
            "actions",
        ),
        (
            replace_dataset("actions", np.zeros(8, np.int64)),
            SchemaError,
            r"shaped \(8,\); the metadata says int64 shaped \(memory_size, num_envs, 1\)",
            "actions",
        ),
        (
            replace_dataset("actions", np.array([[b"ab"] * 2] * 4)),
            SchemaError,
            "stored as bytes16",
            "actions",
        ),
        (
            lambda f: f.create_dataset("extra", data=np.zeros((4, 2))),
            SchemaError,
            "not listed",
            "extra",
        ),
        (
            lambda f: f.__delitem__("actions"),
            SchemaError,
            "listed in the metadata but missing",
            "actions",
        ),
        (
            lambda f: f.attrs.__setitem__("expcli", np.arange(3)),
            FormatError,
            "expected the metadata JSON",
            "expcli",
        ),
        (lambda f: f.attrs.__setitem__("expcli", "{nope"), FormatError, "not valid JSON", "expcli"),
        (
            lambda f: f.attrs.__setitem__("expcli", "[1]"),
            FormatError,
            "expected an object",
            "expcli",
        ),
    ],
)
def test_files_that_disagree_with_their_metadata(
    tmp_path: Path,
    change: Callable[[h5py.File], None],
    error: type[Exception],
    match: str,
    key: str,
) -> None:
    path = write_dataset(sample(), tmp_path / "m.h5")
    rewrite(path, change)
    with pytest.raises(error, match=match) as info:
        read_dataset(path)
    assert info.value.path == str(path) and info.value.key == key  # type: ignore[attr-defined]


def test_header_that_declares_an_absurd_shape(tmp_path: Path) -> None:
    path = write_dataset(sample(), tmp_path / "a.h5")
    header = header_of(path)
    header["tensors"]["observations"]["shape"] = [10**15]
    rewrite(path, lambda f: set_header(f, header))
    with pytest.raises(SchemaError, match="metadata says float32 shaped .*1000000000000000") as e:
        read_dataset(path)
    assert e.value.key == "observations"
    header = header_of(path)
    header["tensors"]["observations"]["shape"] = [-3]
    rewrite(path, lambda f: set_header(f, header))
    with pytest.raises(SchemaError, match="malformed tensor entry"):
        read_dataset(path)
    header["tensors"]["observations"]["shape"] = [3]
    header["memory_size"] = 10**15
    rewrite(path, lambda f: set_header(f, header))
    with pytest.raises(SchemaError, match="metadata says 1000000000000000") as e:
        read_dataset(path)
    assert e.value.key == "memory_size"


@pytest.mark.parametrize(
    ("chunks", "compression"), [(None, None), ((1000, 2), None), ((1000, 2), "gzip")]
)
def test_dataset_larger_than_the_file_is_refused_before_reading(
    tmp_path: Path, chunks: tuple[int, int] | None, compression: str | None
) -> None:
    rows = 10**12  # 16 TB declared
    path = tmp_path / "big.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "x", shape=(rows, 2), dtype=np.float64, chunks=chunks, compression=compression
        )
        if chunks:
            f["x"][:3000] = 1.0  # a few chunks stored, the others declared only
        set_header(f, {**Dataset({"x": np.zeros((1, 2))}).header(), "memory_size": rows})
    assert path.stat().st_size < 1 << 20
    with pytest.raises(FormatError, match="declares 16000000000000 bytes") as info:
        Hdf5Reader(path)  # checks everything, reads no data
    assert info.value.key == "x" and info.value.path == str(path)
    with pytest.raises(FormatError, match="truncated or damaged"):
        read_dataset(path)


def test_dataset_stored_in_another_file_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(bytes(range(16)))
    header = Dataset({"x": np.zeros((2, 1), np.float64)}).header()
    path = tmp_path / "ext.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(2, 1), dtype=np.float64, external=[(str(secret), 0, 16)])
        set_header(f, header)
    with pytest.raises(FormatError, match="other files") as info:
        read_dataset(path)
    assert info.value.key == "x"


def test_soft_and_external_links_are_not_followed(tmp_path: Path) -> None:
    path = write_dataset(sample(), tmp_path / "l.h5")
    rewrite(path, lambda f: f.__setitem__("alias", h5py.SoftLink("/observations")))
    rewrite(path, lambda f: f.__setitem__("far", h5py.ExternalLink("other.h5", "/x")))
    assert_same_dataset(sample(), read_dataset(path))


def test_hdf5_without_metadata_and_of_no_known_layout(tmp_path: Path) -> None:
    path = tmp_path / "foreign.h5"
    with h5py.File(path, "w") as f:
        f["weights"] = np.zeros(3)
        f["nested/thing"] = np.zeros((2, 2))
    with pytest.raises(FormatError, match="no expcli metadata .* no known layout") as info:
        read_dataset(path)
    assert info.value.path == str(path) and "nested/thing, weights" in str(info.value)
    with pytest.raises(FormatError, match="no root attribute 'expcli'"):
        Hdf5Reader(path)


def test_foreign_layouts_get_the_open_file(tmp_path: Path) -> None:
    path = tmp_path / "d4rl.hdf5"
    with h5py.File(path, "w") as f:
        f["rewards"] = np.arange(3.0)

    def recognise(h5: h5py.File, where: Path, num_envs: int | None) -> Dataset:
        assert where == path and num_envs is None
        return Dataset({"rewards": h5["rewards"][()].reshape(3, 1)}, CircularState(0, 0, True))

    read = hdf5_format.read(path, foreign=hdf5_format.ForeignLayouts(recognise, "test"))
    assert read.tensors["rewards"].ravel().tolist() == [0.0, 1.0, 2.0]

    def broken(h5: h5py.File, where: Path, num_envs: int | None) -> Dataset:
        return h5["missing"]  # type: ignore[no-any-return]

    with pytest.raises(FormatError, match="cannot read its layout") as info:
        hdf5_format.read(path, foreign=hdf5_format.ForeignLayouts(broken, "test"))
    assert info.value.path == str(path)


def test_foreign_files_are_checked_before_the_layouts_read_them(tmp_path: Path) -> None:
    path = tmp_path / "hostile.hdf5"
    with h5py.File(path, "w") as f:
        f.create_dataset("observations", shape=(10**12, 3), dtype=np.float32, chunks=(1000, 3))
        f["actions"] = np.zeros(3)
        f["empty"] = h5py.Empty("f4")

    def never(h5: h5py.File, where: Path, num_envs: int | None) -> Dataset:
        raise AssertionError("the layouts should not see this file")

    with pytest.raises(FormatError, match="declares 12000000000000 bytes") as info:
        hdf5_format.read(path, foreign=hdf5_format.ForeignLayouts(never, "test"))
    assert info.value.key == "observations" and info.value.path == str(path)
    rewrite(path, lambda f: f.__delitem__("observations"))
    with pytest.raises(AssertionError, match="should not see"):
        hdf5_format.read(
            path, foreign=hdf5_format.ForeignLayouts(never, "test")
        )  # a small, sparse or empty one goes to the layouts


def test_a_dataset_name_that_is_not_utf8_is_a_format_error(tmp_path: Path) -> None:
    # found by the fuzz test: a flipped byte in a link name made h5py return the name as bytes
    path = tmp_path / "odd.h5"
    write_dataset(sample(), path)
    rewrite(path, lambda f: f.create_dataset(b"\xff\xfe", data=np.zeros((2, 1))))
    with pytest.raises(FormatError, match="not UTF-8") as caught:
        read_dataset(path)
    assert caught.value.path == str(path)
