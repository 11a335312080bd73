"""Column types of foreign tables, written by the real writers and read back value for value.

HF ``datasets`` ``Image`` columns (PNG bit for bit; JPEG as Pillow decodes it, said to be
lossy), HF ``Array2D``/``Array3D`` (an extension type that expcli reads as its storage,
never built), Arrow ``fixed_shape_tensor`` (its permutation too) and large binary of the
shape and dtype an HF feature gives. About 6 s on two cores.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage

from expcli.errors import FormatError, MissingDependencyError
from expcli.formats import read_dataset
from tests.formats.test_foreign_tables import flat, read_warned
from tests.fuzz.structure import png_bytes

datasets = pytest.importorskip("datasets")

ROWS = 12


def minari_steps(rng: np.random.Generator) -> dict[str, Any]:
    """A per-step table's other columns, in Minari's names: two episodes of 5 and 7 steps."""
    terminations, truncations = np.zeros(ROWS, bool), np.zeros(ROWS, bool)
    terminations[4], truncations[11] = True, True
    return {
        "actions": rng.integers(0, 3, ROWS).tolist(),
        "rewards": rng.normal(size=ROWS).astype(np.float32).tolist(),
        "terminations": terminations.tolist(),
        "truncations": truncations.tolist(),
    }


def minari_features(**observations: Any) -> Any:
    values = datasets.Value
    return datasets.Features(
        {
            **observations,
            "actions": values("int64"),
            "rewards": values("float32"),
            "terminations": values("bool"),
            "truncations": values("bool"),
        }
    )


def hf_parquet(path: Path, columns: dict[str, Any], features: Any) -> Path:
    """``Dataset.from_dict(columns, features).to_parquet(path)``, in row groups of 5."""
    datasets.Dataset.from_dict(columns, features=features).to_parquet(
        path, batch_size=5
    )  # batch_size: rows a row group
    return path


def jpeg(frame: np.ndarray) -> Any:
    """A PIL image opened from JPEG bytes (HF keeps the format of an image it is given)."""
    buffer = io.BytesIO()
    PILImage.fromarray(frame).save(buffer, "JPEG", quality=80)
    return PILImage.open(io.BytesIO(buffer.getvalue()))


@pytest.mark.parametrize("channels", [0, 3, 4])
def test_hf_png_images_read_back_bit_for_bit(tmp_path: Path, channels: int) -> None:
    rng = np.random.default_rng(channels)
    shape = (ROWS, 6, 7, channels) if channels else (ROWS, 6, 7)
    frames = rng.integers(0, 256, shape, dtype=np.uint8)
    path = hf_parquet(
        tmp_path / "png.parquet",
        {"observations": list(frames), **minari_steps(rng)},
        minari_features(observations=datasets.Image()),
    )
    assert pq.ParquetFile(path).metadata.num_row_groups == 3
    dataset, said = read_warned(path)
    assert len(said) == 1 and "lossy" not in said[0]
    got = flat(dataset)
    assert got["observations"].dtype == np.uint8
    assert np.array_equal(got["observations"], frames)
    assert np.array_equal(got["next_observations"][:4], frames[1:5])  # the next row's
    assert np.array_equal(got["terminated"][:, 0], np.arange(ROWS) == 4)


def test_hf_jpeg_images_are_decoded_and_said_to_be_lossy(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    frames = rng.integers(0, 256, (ROWS, 8, 8, 3), dtype=np.uint8)
    images = [jpeg(f) for f in frames]
    path = hf_parquet(
        tmp_path / "jpeg.parquet",
        {"observations": images, **minari_steps(rng)},
        minari_features(observations=datasets.Image()),
    )
    dataset, said = read_warned(path)
    assert len(said) == 1
    assert "'observations' holds JPEG images: decoded, lossy" in said[0]
    table = dataset.metadata["table"]
    assert any("JPEG" in u and "lossy" in u for u in table["unknown"])
    blobs = pq.read_table(path).column("observations").combine_chunks().field("bytes")
    decoded = np.stack([np.asarray(PILImage.open(io.BytesIO(b.as_py()))) for b in blobs])
    got = flat(dataset)["observations"]
    assert np.array_equal(got, decoded)  # Pillow's pixels of the JPEG stored
    assert not np.array_equal(got, frames)  # not those that were compressed: lossy


def test_the_cli_converts_an_image_table_with_one_warning_line(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    frames = rng.integers(0, 256, (ROWS, 5, 4, 3), dtype=np.uint8)
    path = hf_parquet(
        tmp_path / "png.parquet",
        {"observations": [jpeg(f) for f in frames], **minari_steps(rng)},
        minari_features(observations=datasets.Image()),
    )
    target = tmp_path / "out.npz"
    out = subprocess.run(
        [sys.executable, "-m", "expcli", "convert", str(path), str(target)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning:") and "JPEG" in lines[0]
    converted = read_dataset(target)
    assert any("lossy" in u for u in converted.metadata["table"]["unknown"])
    expected = flat(read_warned(path)[0])["observations"]
    assert np.array_equal(np.asarray(converted.tensors["observations"])[:, 0], expected)


def test_hf_array2d_and_array3d_are_read_with_their_shape_and_dtype(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    planes = rng.normal(size=(ROWS, 2, 3)).astype(np.float32)
    cubes = rng.integers(-50, 50, (ROWS, 2, 2, 3)).astype(np.int16)
    features = minari_features(
        observations=datasets.Array2D((2, 3), "float32"),
        depth=datasets.Array3D((2, 2, 3), "int16"),
    )
    path = hf_parquet(
        tmp_path / "arrays.parquet",
        {"observations": list(planes), "depth": list(cubes), **minari_steps(rng)},
        features,
    )
    assert "Array2DExtensionType" in str(pq.read_schema(path))  # an extension type, stored
    dataset, said = read_warned(path)
    assert len(said) == 1
    got = flat(dataset)
    assert got["observations"].dtype == np.float32 and got["depth"].dtype == np.int16
    assert np.array_equal(got["observations"], planes)
    assert np.array_equal(got["depth"], cubes)


BUILT: list[bytes] = []


class _Watched(pa.ExtensionType):  # type: ignore[misc]
    """Registered under HF's Array2D name: its deserialiser must never run on a read."""

    def __init__(self) -> None:
        super().__init__(
            pa.list_(pa.list_(pa.float32())), "datasets.features.features.Array2DExtensionType"
        )

    def __arrow_ext_serialize__(self) -> bytes:
        return b'[[2, 3], "float32"]'

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: Any, serialized: bytes) -> _Watched:
        BUILT.append(serialized)
        return cls()


def test_an_hf_array_type_registered_in_the_process_is_never_built(tmp_path: Path) -> None:
    """``datasets`` registers its ArrayND types when imported; expcli reads the storage."""
    rng = np.random.default_rng(8)
    planes = rng.normal(size=(ROWS, 2, 3)).astype(np.float32)
    path = hf_parquet(
        tmp_path / "arrays.parquet",
        {"observations": list(planes), **minari_steps(rng)},
        minari_features(observations=datasets.Array2D((2, 3), "float32")),
    )
    BUILT.clear()
    try:
        pa.unregister_extension_type("datasets.features.features.Array2DExtensionType")
    except KeyError:
        pass
    pa.register_extension_type(_Watched())
    try:
        got = flat(read_warned(path)[0])["observations"]
    finally:
        pa.unregister_extension_type("datasets.features.features.Array2DExtensionType")
    assert BUILT == []
    assert np.array_equal(got, planes)


def test_an_hf_array_whose_rows_disagree_with_its_declared_shape_is_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "declared.parquet"
    table = pa.table({"observations": [[[1.0, 2.0]], [[3.0, 4.0]]], "action": [0, 1]})
    features = {"observations": {"_type": "Array2D", "shape": [1, 3], "dtype": "float64"}}
    table = table.replace_schema_metadata(
        {"huggingface": json.dumps({"info": {"features": features}})}
    )
    pq.write_table(table, path)
    with pytest.raises(
        FormatError,
        match=r"row 0 holds lists of shape \[1, 2\]; its HF feature Array2D declares \[1, 3\]",
    ):
        read_warned(path)


@pytest.mark.parametrize("permutation", [None, [1, 0], [2, 0, 1]])
def test_a_fixed_shape_tensor_column_reads_in_its_logical_order(
    tmp_path: Path, permutation: list[int] | None
) -> None:
    """Arrow's spec: ``shape`` is the stored (row-major) one, and logical dimension ``i``
    is stored dimension ``permutation[i]``. pyarrow 26's ``to_numpy_ndarray`` agrees for
    two dimensions, not for [2, 0, 1] (its strides reach 16 of the 24 values)."""
    rng = np.random.default_rng(9)
    shape = (2, 3) if permutation is None or len(permutation) == 2 else (2, 3, 4)
    values = rng.normal(size=(ROWS, *shape)).astype(np.float32)
    kind = pa.fixed_shape_tensor(pa.float32(), shape, permutation=permutation)
    storage = pa.FixedSizeListArray.from_arrays(values.reshape(-1), int(np.prod(shape)))
    tensors = pa.ExtensionArray.from_storage(kind, storage)
    path = tmp_path / "tensor.parquet"
    pq.write_table(pa.table({"obs": tensors, "action": np.arange(ROWS)}), path, row_group_size=5)
    assert "fixed_shape_tensor" in str(pq.read_schema(path))
    got = flat(read_warned(path)[0])["observations"]
    expected = values if permutation is None else values.transpose(0, *(1 + i for i in permutation))
    assert np.array_equal(got, expected) and got.flags.c_contiguous
    if permutation is None or len(permutation) == 2:
        assert np.array_equal(got, tensors.to_numpy_ndarray())


def test_a_fixed_shape_tensor_of_an_arrow_ipc_file(tmp_path: Path) -> None:
    rng = np.random.default_rng(10)
    values = rng.normal(size=(ROWS, 3, 2)).astype(np.float32)
    tensors = pa.FixedShapeTensorArray.from_numpy_ndarray(values)
    table = pa.table({"obs": tensors, "action": np.arange(ROWS)})
    path = tmp_path / "tensor.arrow"
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=5)
    assert np.array_equal(flat(read_warned(path)[0])["observations"], values)


@pytest.mark.parametrize("kind", [pa.large_binary(), pa.binary()])
def test_bytes_of_the_shape_and_dtype_an_hf_feature_gives(tmp_path: Path, kind: Any) -> None:
    rng = np.random.default_rng(11)
    values = rng.normal(size=(ROWS, 2, 3)).astype(np.float32)
    features = {"observations": {"_type": "Array2D", "shape": [2, 3], "dtype": "float32"}}
    table = pa.table(
        {"observations": pa.array([v.tobytes() for v in values], kind), "action": np.arange(ROWS)}
    ).replace_schema_metadata({"huggingface": json.dumps({"info": {"features": features}})})
    path = tmp_path / "bytes.parquet"
    pq.write_table(table, path, row_group_size=5)
    got = flat(read_warned(path)[0])["observations"]
    assert got.dtype == np.float32 and np.array_equal(got, values)
    short = table.set_column(
        0,
        "observations",
        pa.array([v.tobytes()[: 20 if i == 7 else None] for i, v in enumerate(values)], kind),
    )
    pq.write_table(short, path, row_group_size=5)
    with pytest.raises(
        FormatError,
        match=r"row 7 holds 20 bytes where its HF feature Array2D declares float32 \[2, 3\] "
        r"\(24 bytes\)",
    ):
        read_warned(path)


def test_bytes_without_a_declared_shape_are_refused_naming_their_type(tmp_path: Path) -> None:
    path = tmp_path / "bytes.parquet"
    pq.write_table(
        pa.table({"obs": pa.array([b"ab", b"cd"], pa.large_binary()), "action": [0, 1]}), path
    )
    with pytest.raises(FormatError, match="column is large_binary; expected numbers") as info:
        read_warned(path)
    assert info.value.key == "obs"


def test_without_pillow_an_image_column_names_the_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(12)
    frames = rng.integers(0, 256, (ROWS, 3, 3), dtype=np.uint8)
    path = hf_parquet(
        tmp_path / "png.parquet",
        {"observations": list(frames), **minari_steps(rng)},
        minari_features(observations=datasets.Image()),
    )
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(
        MissingDependencyError, match=r'Pillow is required .*pip install "expcli\[parquet\]"'
    ):
        read_warned(path)


def test_a_jpeg_among_png_images_is_said_lossy_when_it_is_decoded(tmp_path: Path) -> None:
    """The first image says the column's format when the table is opened; a JPEG met later
    is said once, when its row group is decoded."""
    rng = np.random.default_rng(13)
    frames = rng.integers(0, 256, (ROWS, 6, 6, 3), dtype=np.uint8)
    images = [PILImage.fromarray(f) if i < 7 else jpeg(f) for i, f in enumerate(frames)]
    path = hf_parquet(
        tmp_path / "mixed.parquet",
        {"observations": images, **minari_steps(rng)},
        minari_features(observations=datasets.Image()),
    )
    dataset, said = read_warned(path)
    assert len(said) == 2 and "lossy" not in said[0]
    assert said[1] == (
        f"{path}: column 'observations' holds JPEG images (row 7): decoded, they are not the "
        "pixels that were compressed (lossy)"
    )
    got = flat(dataset)["observations"]
    assert np.array_equal(got[:7], frames[:7])


def test_an_hf_cache_stream_with_images_and_arrays_reads_as_its_parquet(tmp_path: Path) -> None:
    """``save_to_disk`` writes an Arrow IPC stream; in a process that imported ``datasets``
    pyarrow builds its ArrayND type there (the IPC reader's), read as its storage."""
    rng = np.random.default_rng(14)
    frames = rng.integers(0, 256, (ROWS, 4, 5, 3), dtype=np.uint8)
    planes = rng.normal(size=(ROWS, 2, 3)).astype(np.float32)
    features = minari_features(
        observations=datasets.Image(), depth=datasets.Array2D((2, 3), "float32")
    )
    columns = {"observations": list(frames), "depth": list(planes), **minari_steps(rng)}
    datasets.Dataset.from_dict(columns, features=features).save_to_disk(str(tmp_path / "saved"))
    got = flat(read_warned(tmp_path / "saved" / "data-00000-of-00001.arrow")[0])
    assert np.array_equal(got["observations"], frames)
    assert np.array_equal(got["depth"], planes)


def test_a_shape_and_dtype_feature_reads_bytes_and_says_nothing_of_numbers(tmp_path: Path) -> None:
    """A feature that is no HF ArrayND but gives a shape and dtype (as LeRobot's do) is
    read for a column of bytes; a column of numbers keeps its own shape."""
    features = {
        "obs": {"shape": [2], "dtype": "uint16"},
        "action": {"shape": [1], "dtype": "int64"},
    }
    table = pa.table(
        {"obs": pa.array([b"\x01\x00\x02\x00", b"\x03\x00\x04\x01"]), "action": [5, 6]}
    ).replace_schema_metadata({"huggingface": json.dumps({"info": {"features": features}})})
    path = tmp_path / "features.parquet"
    pq.write_table(table, path)
    got = flat(read_warned(path)[0])
    assert got["observations"].dtype == np.int32  # widened, as uint16 columns are
    assert got["observations"].tolist() == [[1, 2], [3, 260]]
    assert got["actions"].tolist() == [[5], [6]]


@settings(max_examples=20, deadline=None)
@given(
    rows=st.integers(1, 9),
    height=st.integers(1, 9),
    width=st.integers(1, 9),
    channels=st.sampled_from([0, 2, 3, 4]),
    group=st.integers(1, 5),
    seed=st.integers(0, 2**16),
)
def test_any_png_image_column_reads_back_bit_for_bit(
    tmp_path_factory: pytest.TempPathFactory,
    rows: int,
    height: int,
    width: int,
    channels: int,
    group: int,
    seed: int,
) -> None:
    shape = (rows, height, width, channels) if channels else (rows, height, width)
    frames = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
    images = pa.StructArray.from_arrays(
        [pa.array([png_bytes(f) for f in frames], pa.binary()), pa.nulls(rows, pa.string())],
        ["bytes", "path"],
    )
    features = {"observations": {"_type": "Image"}}
    table = pa.table({"observations": images, "action": np.arange(rows)})
    path = tmp_path_factory.mktemp("png") / "images.parquet"
    meta = {"huggingface": json.dumps({"info": {"features": features}})}
    pq.write_table(table.replace_schema_metadata(meta), path, row_group_size=group)
    assert np.array_equal(flat(read_warned(path)[0])["observations"], frames)


@settings(max_examples=20, deadline=None)
@given(
    shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
    data=st.data(),
)
def test_any_fixed_shape_tensor_reads_back_in_its_logical_order(
    tmp_path_factory: pytest.TempPathFactory, shape: list[int], seed: int, data: Any
) -> None:
    order = data.draw(st.permutations(range(len(shape))))
    values = np.random.default_rng(seed).normal(size=(5, *shape)).astype(np.float32)
    kind = pa.fixed_shape_tensor(pa.float32(), shape, permutation=order)
    storage = pa.FixedSizeListArray.from_arrays(values.reshape(-1), int(np.prod(shape)))
    tensors = pa.ExtensionArray.from_storage(kind, storage)
    path = tmp_path_factory.mktemp("tensor") / "tensor.parquet"
    pq.write_table(pa.table({"obs": tensors, "action": np.arange(5)}), path, row_group_size=2)
    got = flat(read_warned(path)[0])["observations"]
    assert np.array_equal(got, values.transpose(0, *(1 + i for i in order)))


def test_lerobot_named_image_columns_are_dict_leaves_and_mappable(tmp_path: Path) -> None:
    """HF images under LeRobot's names (``observation.image`` beside ``observation.state``)
    become the Dict leaf ``observations/image``; ``columns=`` maps another image column."""
    from expcli import load

    rng = np.random.default_rng(15)
    frames = rng.integers(0, 256, (6, 8, 8, 3), dtype=np.uint8)
    values = datasets.Value
    features = datasets.Features(
        {
            "observation.image": datasets.Image(),
            "observation.state": datasets.Sequence(values("float32"), length=2),
            "action": values("float32"),
            "episode_index": values("int64"),
            "frame_index": values("int64"),
            "next.done": values("bool"),
            "cam": datasets.Image(),
        }
    )
    columns = {
        "observation.image": list(frames),
        "observation.state": rng.normal(size=(6, 2)).astype(np.float32).tolist(),
        "action": [0.5] * 6,
        "episode_index": [0] * 3 + [1] * 3,
        "frame_index": [0, 1, 2] * 2,
        "next.done": [False, False, True] * 2,
        "cam": list(frames[::-1]),
    }
    path = hf_parquet(tmp_path / "lerobot.parquet", columns, features)
    with pytest.warns(UserWarning, match="read from its columns"):
        dataset = load(path)
    assert np.array_equal(np.asarray(dataset.tensors["observations/image"])[:, 0], frames)
    with pytest.warns(UserWarning, match="read from its columns"):
        mapped = load(path, columns="observations/cam=cam,actions=action")
    assert np.array_equal(np.asarray(mapped.tensors["observations/cam"])[:, 0], frames[::-1])
