"""Write then read gives back the same dataset, bit for bit, in every format."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from expcli.formats import Dataset, read_dataset, write_dataset
from expcli.spec import CircularState
from tests.format_catalogue import FILE_FORMATS

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
NAMES = [
    "observations",
    "next_observations",
    "actions",
    "rewards",
    "terminated",
    "truncated",
    "log_prob",
    "infos/lives",
    "a.b",
    "file",
    "x,y",
]
INTEGERS = st.integers(-(2**63), 2**64 - 1)  # metadata's domain; past it, refused both ways
JSON = st.recursive(
    st.none() | st.booleans() | INTEGERS | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def arrays(draw: st.DrawFn, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values of any kind: hypothesis' edge cases, or raw bits (NaN payloads, subnormals)."""
    dt = np.dtype(dtype)
    if dt.kind == "f" and draw(st.booleans()):
        size = int(np.prod(shape)) * dt.itemsize
        raw = draw(st.binary(min_size=size, max_size=size))
        array = np.frombuffer(raw, dtype=dt).reshape(shape)
        return array if draw(st.booleans()) else array.copy()  # read-only views too
    return draw(hnp.arrays(dt, shape))


@st.composite
def datasets(draw: st.DrawFn, *, with_created: bool = True) -> Dataset:
    memory_size, num_envs = draw(st.integers(0, 4)), draw(st.integers(0, 3))
    tensors = {}
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=4, unique=True)):
        feature = draw(st.lists(st.integers(0, 3), max_size=2))
        dtype = draw(st.sampled_from(DTYPES))
        tensors[name] = draw(arrays(dtype, (memory_size, num_envs, *feature)))
    state = CircularState(
        draw(st.integers(0, max(memory_size - 1, 0))),
        draw(st.integers(0, max(num_envs - 1, 0))),
        draw(st.booleans()),
    )
    metadata = draw(st.dictionaries(st.text(max_size=8), JSON, max_size=4))
    metadata.pop("rows", None)  # reserved by the CSV sidecar; tested on its own
    if with_created:
        metadata["created"] = "2024-01-02T03:04:05+00:00"
    return Dataset(tensors, state, metadata)


def assert_same_dataset(expected: Dataset, actual: Dataset) -> None:
    """Same names, dtypes, shapes, bits (NaN payloads included) and circular state."""
    assert sorted(actual.tensors) == sorted(expected.tensors)
    for name, want in expected.tensors.items():
        got = actual.tensors[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert np.ascontiguousarray(got).view(np.uint8).tobytes() == (
            np.ascontiguousarray(want).view(np.uint8).tobytes()
        ), name
    assert actual.state == expected.state
    written = Dataset.split_header(json.loads(json.dumps(expected.header())))[1]
    if "created" not in expected.metadata:  # stamped when written: a second may have passed
        written.pop("created")
        assert "created" in actual.metadata
        actual = Dataset(actual.tensors, actual.state, dict(actual.metadata))
        actual.metadata.pop("created")
    assert actual.metadata == written


@pytest.mark.parametrize("fmt", FILE_FORMATS)
@settings(max_examples=60, deadline=None)
@given(dataset=datasets())
def test_write_then_read_is_lossless(fmt: str, dataset: Dataset) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = write_dataset(dataset, Path(folder) / f"data.{fmt}")
        assert path == Path(folder) / f"data.{fmt}"
        assert_same_dataset(dataset, read_dataset(path))


@settings(max_examples=40, deadline=None)
@given(
    dataset=datasets(),
    chain=st.lists(st.sampled_from(FILE_FORMATS), min_size=2, max_size=4),
)
def test_converting_through_every_format_is_lossless(dataset: Dataset, chain: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        current = dataset
        for index, fmt in enumerate(chain):
            current = read_dataset(write_dataset(current, Path(folder) / f"{index}.{fmt}"))
        assert_same_dataset(dataset, current)


@pytest.mark.parametrize("fmt", FILE_FORMATS)
def test_created_is_stamped_when_missing_and_kept_after(tmp_path: Path, fmt: str) -> None:
    dataset = Dataset({"x": np.zeros((2, 1, 3), np.float32)}, metadata={"env_id": "CartPole-v1"})
    first = read_dataset(write_dataset(dataset, tmp_path / f"a.{fmt}"))
    assert first.metadata["env_id"] == "CartPole-v1"
    assert isinstance(first.metadata["created"], str)
    second = read_dataset(write_dataset(first, tmp_path / f"b.{fmt}"))
    assert second.metadata == first.metadata


@pytest.mark.parametrize("fmt", FILE_FORMATS)
def test_special_float_values_survive(tmp_path: Path, fmt: str) -> None:
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 5e-324, 0.1, 1 / 3, 65504.0, 6e-8]
    tensors = {
        dtype: np.array(values, dtype=dtype).reshape(len(values), 1)
        for dtype in ("float16", "float32", "float64")
    }
    dataset = Dataset(tensors, CircularState(0, 0, True), {"created": "now"})
    assert_same_dataset(dataset, read_dataset(write_dataset(dataset, tmp_path / f"s.{fmt}")))


def test_csv_is_plain_text_with_skrl_header_and_sidecar(tmp_path: Path) -> None:
    dataset = Dataset(
        {
            "observations": np.array([[[0.1, -0.0]], [[np.nan, np.inf]]], np.float32),
            "terminated": np.array([[True], [False]]),
            "actions": np.array([[[3]], [[-4]]], np.int8),
        },
        CircularState(1, 0, False),
        {"created": "now", "env_id": "E"},
    )
    path = write_dataset(dataset, tmp_path / "run.csv")
    assert path.read_text().splitlines() == [
        "actions.0,observations.0,observations.1,terminated.0",
        "3,0.1,-0.0,True",  # float32: the shortest text that reads back to the same float32
        "-4,nan,inf,False",
    ]
    sidecar = json.loads((tmp_path / "run.csv.meta.json").read_text())
    assert sidecar["rows"] == 2 and sidecar["schema"] == "expcli/1"
    assert sidecar["tensors"]["observations"] == {"dtype": "float32", "shape": [2]}
    assert (sidecar["memory_index"], sidecar["env_index"], sidecar["filled"]) == (1, 0, False)


def test_csv_writes_every_row_in_t_env_order(tmp_path: Path) -> None:
    times = np.arange(6, dtype=np.int64).reshape(3, 2)  # row r = t * N + env
    dataset = Dataset({"t": times}, CircularState(1, 1, False))
    lines = write_dataset(dataset, tmp_path / "o.csv").read_text().splitlines()
    assert lines == ["t.0", "0", "1", "2", "3", "4", "5"]


def test_csv_metadata_may_not_use_the_rows_key(tmp_path: Path) -> None:
    from expcli.errors import SchemaError

    dataset = Dataset({"x": np.zeros((1, 1))}, metadata={"rows": 3})
    with pytest.raises(SchemaError, match="reserved") as info:
        write_dataset(dataset, tmp_path / "r.csv")
    assert info.value.key == "rows"
    assert list(tmp_path.iterdir()) == []
    assert read_dataset(write_dataset(dataset, tmp_path / "r.npz")).metadata["rows"] == 3


@pytest.mark.parametrize("fmt", FILE_FORMATS)
def test_non_native_byte_order_and_strided_arrays(tmp_path: Path, fmt: str) -> None:
    big_endian = np.arange(12, dtype=">f4").reshape(3, 2, 2)
    strided = np.arange(24, dtype=np.int16).reshape(3, 2, 4)[::-1, :, ::2]
    dataset = Dataset({"b": big_endian, "s": strided}, CircularState(0, 0, True))
    back = read_dataset(write_dataset(dataset, tmp_path / f"o.{fmt}"))
    np.testing.assert_array_equal(back.tensors["b"], big_endian)
    np.testing.assert_array_equal(back.tensors["s"], strided)
    assert back.tensors["s"].dtype == np.int16


def test_npz_tensor_names_that_are_parameters_of_savez(tmp_path: Path) -> None:
    dataset = Dataset(
        {"file": np.ones((2, 1), np.int8), "allow_pickle": np.zeros((2, 1, 2), np.float16)},
        metadata={"created": "now"},
    )
    path = write_dataset(dataset, tmp_path / "names.npz")
    with np.load(path, allow_pickle=False) as archive:
        assert sorted(archive.files) == ["__expcli__", "allow_pickle", "file"]
    assert_same_dataset(dataset, read_dataset(path))
