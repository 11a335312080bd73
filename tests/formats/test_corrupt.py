"""Truncated, empty, garbage and unsafe files fail with an expcli error naming the file."""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expcli.errors import FormatError, SchemaError
from expcli.formats import Dataset, read_dataset, write_dataset
from expcli.spec import CircularState
from tests.format_catalogue import FILE_FORMATS, READ_FORMATS
from tests.formats.conftest import assert_expcli_error_or_valid


class Exploit:
    """A pickle that creates a marker file when loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def sample() -> Dataset:
    return Dataset(
        {
            "observations": np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 2, 3),
            "actions": np.arange(8, dtype=np.int64).reshape(4, 2, 1),
            "terminated": np.eye(4, 2, dtype=bool),
        },
        CircularState(2, 1, False),
        {"env_id": "CartPole-v1"},
    )


def written(folder: Path, fmt: str) -> Path:
    return write_dataset(sample(), folder / f"data.{fmt}")


@pytest.mark.parametrize("fmt", FILE_FORMATS)
@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("damage", ["empty", "half", "garbage", "text"])
def test_damaged_files_raise_format_error(
    tmp_path: Path, fmt: str, explicit: bool, damage: str
) -> None:
    path = written(tmp_path, fmt)
    data = path.read_bytes()
    replacement = {
        "empty": b"",
        "half": data[: len(data) // 2],
        "garbage": random.Random(0).randbytes(len(data)),
        "text": b"hello world\n",
    }[damage]
    path.write_bytes(replacement)
    with pytest.raises(FormatError) as info:
        read_dataset(path, format=fmt if explicit else None)
    assert info.value.path == str(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("fmt", FILE_FORMATS)
@pytest.mark.parametrize("other", READ_FORMATS)
def test_explicit_wrong_format_raises_format_error(tmp_path: Path, fmt: str, other: str) -> None:
    path = written(tmp_path, fmt)
    if fmt == other:
        assert read_dataset(path, format=other).state == sample().state
    else:
        with pytest.raises(FormatError):
            read_dataset(path, format=other)


@pytest.mark.parametrize("fmt", FILE_FORMATS)
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_damage_gives_an_expcli_error_or_a_valid_dataset(
    tmp_path: Path, fmt: str, data: st.DataObject
) -> None:
    original = written(tmp_path, fmt).read_bytes()
    damaged = bytearray(original)
    if data.draw(st.booleans(), label="truncate"):
        damaged = damaged[: data.draw(st.integers(0, len(original) - 1), label="length")]
    else:
        for index in data.draw(st.lists(st.integers(0, len(original) - 1), min_size=1, max_size=4)):
            damaged[index] = data.draw(st.integers(0, 255))
    with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
        path = Path(folder) / f"data.{fmt}"
        path.write_bytes(bytes(damaged))
        if fmt == "csv":
            os.link(tmp_path / "data.csv.meta.json", Path(folder) / "data.csv.meta.json")
        assert_expcli_error_or_valid(path)


def test_pickle_that_would_run_code_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for name, legacy in (("evil.pt", False), ("evil_legacy.pt", True)):
        path = tmp_path / name
        payload = {"observations": torch.zeros(2, 1, 1), "payload": Exploit(marker)}
        torch.save(payload, path, _use_new_zipfile_serialization=not legacy)
        with pytest.raises(FormatError, match="refused to unpickle") as info:
            read_dataset(path)
        assert info.value.path == str(path)
        assert "weights_only" not in str(info.value)  # no advice to load it unsafely
        assert not marker.exists()
    plain = tmp_path / "plain.pt"
    plain.write_bytes(pickle.dumps({"payload": Exploit(marker)}))
    with pytest.raises(FormatError):
        read_dataset(plain)
    assert not marker.exists()


def test_npz_with_object_array_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.npz"
    np.savez(path, observations=np.array([Exploit(marker)], dtype=object))
    with pytest.raises(FormatError, match="object arrays are never unpickled") as info:
        read_dataset(path)
    assert info.value.path == str(path)
    assert not marker.exists()


def test_npz_with_a_member_that_is_not_npy(tmp_path: Path) -> None:
    path = tmp_path / "odd.npz"
    with zipfile.ZipFile(path, "w") as archive:
        buffer = io.BytesIO()
        np.save(buffer, np.zeros((2, 1)))
        archive.writestr("x.npy", buffer.getvalue())
        archive.writestr("notes.txt", "hello")
    with pytest.raises(FormatError, match="expected only .npy members") as info:
        read_dataset(path)
    assert info.value.key == "notes.txt"


def test_single_npy_named_npz(tmp_path: Path) -> None:
    path = tmp_path / "one.npz"
    with open(path, "wb") as f:
        np.save(f, np.zeros((2, 1)))
    with pytest.raises(FormatError, match="not an .npz archive .it holds a single .npy array"):
        read_dataset(path)


@pytest.mark.parametrize(
    ("payload", "match", "key"),
    [
        ({"x": torch.zeros(2, 1), "y": [1, 2]}, "holds a list; expected a tensor", "y"),
        ({"x": torch.zeros(2, 1), "__expcli__": 3}, "expected the metadata JSON string", None),
        (torch.zeros(2, 1), "holds a Tensor; expected a dict of tensors", None),
        ({1: torch.zeros(2, 1)}, "expected tensor names", None),
    ],
)
def test_pt_that_is_not_a_dict_of_tensors(
    tmp_path: Path, payload: object, match: str, key: str | None
) -> None:
    path = tmp_path / "odd.pt"
    torch.save(payload, path)
    with pytest.raises(FormatError, match=match) as info:
        read_dataset(path)
    if key is not None:
        assert info.value.key == key


def test_unsupported_tensor_dtype(tmp_path: Path) -> None:
    path = tmp_path / "bf16.pt"
    torch.save({"x": torch.zeros(2, 1, dtype=torch.bfloat16)}, path)
    with pytest.raises(SchemaError, match="bfloat16") as info:
        read_dataset(path)
    assert info.value.key == "x"


def test_tensor_that_is_not_time_major(tmp_path: Path) -> None:
    path = tmp_path / "flat.npz"
    np.savez(path, x=np.zeros(3))
    with pytest.raises(SchemaError, match="memory_size, num_envs") as info:
        read_dataset(path)
    assert info.value.key == "x"


def metadata_of(path: Path) -> dict[str, object]:
    with np.load(path) as archive:
        return dict(json.loads(str(archive["__expcli__"])))


def rewrite_npz(path: Path, metadata: object) -> None:
    """Replace the metadata member: a string as is, anything else as JSON or an array."""
    with np.load(path) as archive:
        members = {k: archive[k] for k in archive.files if k != "__expcli__"}
    if isinstance(metadata, np.ndarray):
        members["__expcli__"] = metadata
    else:
        text = metadata if isinstance(metadata, str) else json.dumps(metadata)
        members["__expcli__"] = np.array(text)
    np.savez(path, **members)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (lambda m: "{not json", FormatError, "not valid JSON"),
        (lambda m: [1, 2], FormatError, "expected an object"),
        (lambda m: {**m, "schema": "other/9"}, SchemaError, "unknown schema"),
        (lambda m: {**m, "filled": "yes"}, SchemaError, "circular state"),
        (lambda m: {**m, "memory_index": 7}, SchemaError, "circular state does not fit"),
        (lambda m: {**m, "num_envs": 5}, SchemaError, "metadata says 5"),
        (lambda m: {**m, "tensors": {}}, SchemaError, "not listed in the metadata"),
        (lambda m: {k: v for k, v in m.items() if k != "tensors"}, SchemaError, "lacks"),
        (
            lambda m: {**m, "tensors": {**m["tensors"], "extra": {"dtype": "int8", "shape": []}}},
            SchemaError,
            "listed in the metadata but missing",
        ),
        (
            lambda m: {
                **m,
                "tensors": {**m["tensors"], "actions": {"dtype": "int8", "shape": [1]}},
            },
            SchemaError,
            "the metadata says int8",
        ),
        (
            lambda m: {**m, "tensors": {**m["tensors"], "actions": {"dtype": "str", "shape": [1]}}},
            SchemaError,
            "malformed tensor entry",
        ),
    ],
)
def test_metadata_that_disagrees_with_the_tensors(
    tmp_path: Path, change: object, error: type[Exception], match: str
) -> None:
    path = written(tmp_path, "npz")
    rewrite_npz(path, change(metadata_of(path)))  # type: ignore[operator]
    with pytest.raises(error, match=match) as info:
        read_dataset(path)
    assert info.value.path == str(path)  # type: ignore[attr-defined]


def test_metadata_member_of_the_wrong_kind(tmp_path: Path) -> None:
    path = written(tmp_path, "npz")
    rewrite_npz(path, np.zeros(3))
    with pytest.raises(FormatError, match="expected a 0-d unicode string"):
        read_dataset(path)


def test_metadata_that_is_not_json_serialisable(tmp_path: Path) -> None:
    dataset = Dataset({"x": np.zeros((1, 1))}, metadata={"ok": 1, "seed": object()})
    for fmt in FILE_FORMATS:
        with pytest.raises(SchemaError, match="not JSON-serialisable") as info:
            write_dataset(dataset, tmp_path / f"x.{fmt}")
        assert info.value.key == "seed"
    assert list(tmp_path.iterdir()) == []


def test_reserved_tensor_name_and_invalid_datasets_are_not_written(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="reserved"):
        write_dataset(Dataset({"__expcli__": np.zeros((1, 1))}), tmp_path / "x.npz")
    with pytest.raises(SchemaError, match="disagrees"):
        write_dataset(Dataset({"a": np.zeros((1, 1)), "b": np.zeros((2, 1))}), tmp_path / "x.pt")
    with pytest.raises(SchemaError, match="not supported"):
        write_dataset(Dataset({"a": np.zeros((1, 1), np.complex64)}), tmp_path / "x.csv")
    assert list(tmp_path.iterdir()) == []
