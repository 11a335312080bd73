"""Damaged and hostile Parquet files: one line naming the file, exit 1, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from expcli.errors import ExpcliError, FormatError
from expcli.formats import read_dataset, write_dataset
from tests.formats.conftest import assert_expcli_error_or_valid
from tests.formats.test_parquet import cartpole

pa = pytest.importorskip("pyarrow", reason="pyarrow cannot be installed on this Python")
pq = pytest.importorskip("pyarrow.parquet")


def written(folder: Path) -> Path:
    return write_dataset(cartpole(), folder / "run.parquet")


def rewritten(path: Path, change: Callable[[Any, dict[bytes, bytes]], Any]) -> Path:
    """The file written again with ``change(table, footer metadata)``'s table."""
    table = pq.read_table(path)
    kv = dict(pq.ParquetFile(path).metadata.metadata)
    kv.pop(b"ARROW:schema")  # pyarrow stores the new table's
    table = change(table, kv)
    pq.write_table(table.replace_schema_metadata(kv), path)
    return path


def header_edit(**keys: Any) -> Callable[[Any, dict[bytes, bytes]], Any]:
    def change(table: Any, kv: dict[bytes, bytes]) -> Any:
        header = json.loads(kv[b"expcli"])
        header.update(keys)
        kv[b"expcli"] = json.dumps(header).encode()
        return table

    return change


def raw_edit(key: bytes, value: bytes) -> Callable[[Any, dict[bytes, bytes]], Any]:
    def change(table: Any, kv: dict[bytes, bytes]) -> Any:
        kv[key] = value
        return table

    return change


def column_edit(name: str, array: Any) -> Callable[[Any, dict[bytes, bytes]], Any]:
    def change(table: Any, kv: dict[bytes, bytes]) -> Any:
        return table.set_column(table.schema.get_field_index(name), name, array)

    return change


def assert_one_line_exit_1(path: Path, *extra: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "expcli", "inspect", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert str(path) in lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "damage",
    ["empty", "magic", "no_tail", "half", "footer_cut", "footer_garbage", "tail_length"],
)
def test_damaged_bytes(tmp_path: Path, damage: str) -> None:
    path = written(tmp_path)
    data = path.read_bytes()
    footer = int.from_bytes(data[-8:-4], "little")
    damaged = {
        "empty": b"",
        "magic": b"PAR2" + data[4:],
        "no_tail": data[:-4],
        "half": data[: len(data) // 2],
        "footer_cut": data[: -footer // 2 - 8] + data[-8:],
        "footer_garbage": data[: -footer - 8] + bytes(range(256)) * (footer // 256 + 1) + data[-8:],
        "tail_length": data[:-8] + (2**31 - 1).to_bytes(4, "little") + b"PAR1",  # huge footer
    }[damage]
    path.write_bytes(damaged)
    with pytest.raises(FormatError):
        read_dataset(path)
    assert_one_line_exit_1(path)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (raw_edit(b"expcli", b"{not json"), "not valid JSON"),
        (raw_edit(b"expcli", b"[" * 100_000 + b"]" * 100_000), "nested too deep"),
        (raw_edit(b"expcli", b"[1, 2]"), "expected an object"),
        (raw_edit(b"expcli.parquet", b'{"layout": "other"}'), "expcli-parquet/1"),
        (raw_edit(b"expcli.parquet", b'{"layout": "expcli-parquet/1", "rows": 12}'), "encodings"),
        (header_edit(num_envs=-3), "sizes"),
        (header_edit(schema="other/9"), "unknown schema"),
        (header_edit(memory_index=99), "circular state"),
        (header_edit(tensors={"observations": {"dtype": "object", "shape": [4]}}), "malformed"),
        (
            header_edit(
                tensors={**{n: {"dtype": "bool", "shape": []} for n in ("terminated",)}},
            ),
            "encodings",
        ),
    ],
)
def test_bad_metadata(tmp_path: Path, change: Any, says: str) -> None:
    path = rewritten(written(tmp_path), change)
    with pytest.raises(ExpcliError, match=says):
        read_dataset(path)
    assert_one_line_exit_1(path)


def test_a_footer_whose_row_count_disagrees_is_not_believed(tmp_path: Path) -> None:
    """10^15 rows said, 12 held: read from its columns (``foreign_table``), and said so; its
    frames, bytes in the file, are the tensor the footer names."""
    path = written(tmp_path)
    frames = read_dataset(path).tensors["frames"]
    path = rewritten(path, header_edit(memory_size=10**15))
    with pytest.warns(UserWarning, match=r"rows disagree with its expcli metadata \(12 rows"):
        dataset = read_dataset(path)
    assert len(dataset) == 12 and dataset.metadata["layout"] == "table"
    assert np.array_equal(dataset.tensors["frames"].reshape(frames.shape), frames)


def test_columns_of_other_types_are_refused(tmp_path: Path) -> None:
    three = pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(36, np.float32)), 3)
    path = rewritten(written(tmp_path), column_edit("observations", three))
    with pytest.raises(FormatError, match="observations.*expected fixed_size_list"):
        read_dataset(path)
    assert_one_line_exit_1(path)


def test_nulls_are_refused(tmp_path: Path) -> None:
    rewards = pa.array([1.0] * 11 + [None], pa.float32())
    path = rewritten(written(tmp_path), column_edit("rewards", rewards))
    with pytest.raises(FormatError, match="null"):
        read_dataset(path)
    assert_one_line_exit_1(path)


BUILT: list[bytes] = []


class _Registered(pa.ExtensionType):  # type: ignore[misc]
    """An extension type a library registered in the process (as ray and datasets do)."""

    def __init__(self) -> None:
        super().__init__(pa.float32(), "expcli.test.registered")

    def __arrow_ext_serialize__(self) -> bytes:
        return b"payload"

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: Any, serialized: bytes) -> _Registered:
        BUILT.append(serialized)
        return cls()


@pytest.mark.parametrize("shift", [0, 1, 2])
def test_extension_types_from_a_file_are_never_built(tmp_path: Path, shift: int) -> None:
    data = pa.ExtensionArray.from_storage(_Registered(), pa.array(np.ones(12, np.float32)))
    path = rewritten(written(tmp_path), column_edit("rewards", data))
    path = rewritten(path, raw_edit(b"pandas", b'{"columns": "__import__"}'))
    path = rewritten(path, raw_edit(b"x", b"y" * shift))  # moves the key's base64 alignment
    pa.register_extension_type(_Registered())
    BUILT.clear()
    try:
        with pytest.raises(FormatError, match="extension type"):
            read_dataset(path)
        assert BUILT == []
    finally:
        pa.unregister_extension_type("expcli.test.registered")
    assert_one_line_exit_1(path)


def test_a_parquet_file_not_written_by_expcli_and_of_no_known_columns(tmp_path: Path) -> None:
    """Read from its columns (``test_foreign_tables``), but none is observations or actions."""
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"price": [1.0, 2.0]}), path)
    with pytest.raises(FormatError, match="no column expcli recognises as observations"):
        read_dataset(path)
    assert "no column expcli recognises" in assert_one_line_exit_1(path)


def test_flipped_bytes_never_escape(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    data = written(tmp_path).read_bytes()
    for case in range(60):
        damaged = bytearray(data)
        for spot in rng.integers(0, len(data), rng.integers(1, 4)):
            damaged[spot] ^= int(rng.integers(1, 256))
        path = tmp_path / f"flip{case}.parquet"
        path.write_bytes(bytes(damaged))
        assert_expcli_error_or_valid(path)
