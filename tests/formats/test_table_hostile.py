"""Hostile foreign tables: each refused in one line naming the file, exit 1, bounded.

A table of 10^5 columns, lists that declare 2^40 values a row, image bytes that are bombs
(a PNG or JPEG header claiming billions of pixels, a row group of images that decodes to
more than a group may), a done column of strings, extension types that expcli does not
read, image columns that name files instead of holding bytes. The four the issue names go
through the CLI; the rest are read in the process. About 5 s on two cores.
"""

from __future__ import annotations

import base64
import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image as PILImage

from expcli.errors import FormatError
from expcli.formats import foreign_table
from expcli.formats._parquet_open import GROUP_VARIABLE
from tests.formats.test_foreign_tables import one_line_exit_1, read_warned
from tests.fuzz.structure import bomb_jpeg, bomb_png, png_bytes

IMAGE_FEATURES = {"info": {"features": {"observations": {"_type": "Image"}}}}


def image_table(
    path: Path, blobs: list[bytes | None], paths: list[str | None] | None = None
) -> Path:
    """An HF-style table: ``observations`` images (struct of bytes and path), an action."""
    images = pa.StructArray.from_arrays(
        [pa.array(blobs, pa.binary()), pa.array(paths or [None] * len(blobs), pa.string())],
        ["bytes", "path"],
    )
    table = pa.table({"observations": images, "action": np.arange(len(blobs))})
    pq.write_table(table.replace_schema_metadata({"huggingface": json.dumps(IMAGE_FEATURES)}), path)
    return path


def wide_ipc(path: Path) -> Path:
    """An Arrow IPC file of 10^5 columns (its schema alone: 0.2 s to write)."""
    fields = [pa.field(f"c{i}", pa.float32()) for i in range(100_000)]
    schema = pa.schema([pa.field("observations", pa.float32()), *fields])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, schema):
        pass
    return path


def declared_schema(path: Path, table: Any, schema: Any) -> Path:
    """``table`` written with ``schema`` stored as its Arrow schema (what pyarrow reads back)."""
    encoded = base64.b64encode(schema.serialize().to_pybytes())
    with pq.ParquetWriter(path, table.schema, store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({"ARROW:schema": encoded})
    return path


def huge_fixed_lists(path: Path) -> Path:
    """Lists whose stored type declares 2^20 x 2^20 values a row (two rows of a few)."""
    table = pa.table({"observations": [[[1.0]], [[2.0]]], "action": [0, 1]})
    kind = pa.list_(pa.list_(pa.float32(), 1 << 20), 1 << 20)
    return declared_schema(path, table, pa.schema([("observations", kind), ("action", pa.int64())]))


def huge_tensor(path: Path) -> Path:
    """A ``fixed_shape_tensor`` whose metadata declares shape [2^20, 2^20]."""
    table = pa.table({"observations": [[1.0] * 6, [2.0] * 6], "action": [0, 1]})
    metadata = {
        b"ARROW:extension:name": b"arrow.fixed_shape_tensor",
        b"ARROW:extension:metadata": json.dumps({"shape": [1 << 20, 1 << 20]}).encode(),
    }
    field = pa.field("observations", pa.list_(pa.float32()), metadata=metadata)
    return declared_schema(path, table, pa.schema([field, ("action", pa.int64())]))


def huge_hf_array(path: Path) -> Path:
    """An HF ``Array2D`` feature declaring shape [2^20, 2^20] over lists of one value."""
    features = {
        "observations": {"_type": "Array2D", "shape": [1 << 20, 1 << 20], "dtype": "float32"}
    }
    table = pa.table({"observations": [[[1.0]], [[2.0]]], "action": [0, 1]})
    meta = {"huggingface": json.dumps({"info": {"features": features}})}
    pq.write_table(table.replace_schema_metadata(meta), path)
    return path


def done_strings(path: Path) -> Path:
    pq.write_table(pa.table({"obs": [0.5, 1.5, 2.5], "done": ["no", "no", "yes"]}), path)
    return path


CLI_CASES: dict[str, tuple[Callable[[Path], Path], str, str]] = {
    "1e5-columns": (wide_ipc, "wide.arrow", "has 100,001 columns, more than the 4,096 read"),
    "2^40-fixed-lists": (huge_fixed_lists, "lists.parquet", "more than 268,435,456 values a row"),
    "2^40-tensor": (
        huge_tensor,
        "tensor.parquet",
        "declares shape [1048576, 1048576] (1,099,511,627,776 values)",
    ),
    "2^40-hf-array": (huge_hf_array, "array.parquet", "declares [1048576, 1048576]"),
    "png-bomb": (
        lambda p: image_table(p, [png_bytes(np.zeros((2, 2), np.uint8)), bomb_png()]),
        "bomb.parquet",
        "holds a decompression bomb",
    ),
    "jpeg-bomb": (
        lambda p: image_table(p, [bomb_jpeg()]),
        "bomb.parquet",
        "row 0 holds a decompression bomb",
    ),
    "done-strings": (
        done_strings,
        "done.parquet",
        "column is string; expected numbers or booleans",
    ),
}


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_a_hostile_table_is_one_line_through_the_cli(tmp_path: Path, case: str) -> None:
    make, name, words = CLI_CASES[case]
    path = make(tmp_path / name)
    started = time.monotonic()
    line = one_line_exit_1(path)
    assert time.monotonic() - started < 30
    assert words in line, line


def test_a_parquet_table_of_too_many_columns_is_refused_before_any_is_read(tmp_path: Path) -> None:
    path = tmp_path / "wide.parquet"
    width = foreign_table.MAX_TABLE_COLUMNS + 1
    schema = pa.schema(
        [pa.field("obs", pa.float32())] + [pa.field(f"c{i}", pa.int8()) for i in range(width)]
    )
    pq.write_table(schema.empty_table(), path, write_statistics=False)
    with pytest.raises(FormatError, match=f"has {width + 1:,} columns"):
        read_warned(path)


@pytest.mark.parametrize(
    ("blobs", "paths", "words"),
    [
        (
            [png_bytes(np.zeros((4, 4, 3), np.uint8)), png_bytes(np.zeros((4, 5, 3), np.uint8))],
            None,
            r"row 1 holds an image of shape \[4, 5, 3\] where the first holds \[4, 4, 3\]",
        ),
        (
            [None, None],
            ["/etc/passwd", None],
            "row 0 holds no image bytes, only the path '/etc/passwd'",
        ),
        ([b"not an image"], None, "row 0 holds no PNG or JPEG image"),
        ([None], None, "row 0 holds no image bytes, no path either"),
    ],
    ids=["shapes-differ", "path-alone", "not-an-image", "neither"],
)
def test_image_columns_that_cannot_be_one_tensor_are_refused(
    tmp_path: Path, blobs: list[bytes | None], paths: list[str | None] | None, words: str
) -> None:
    path = image_table(tmp_path / "images.parquet", blobs, paths)
    with pytest.raises(FormatError, match=words) as info:
        read_warned(path)
    assert info.value.key == "observations"


def test_an_image_format_other_than_png_or_jpeg_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    PILImage.fromarray(np.zeros((4, 4), np.uint8)).save(buffer, "BMP")
    path = image_table(tmp_path / "bmp.parquet", [buffer.getvalue()])
    with pytest.raises(FormatError, match="row 0 holds no PNG or JPEG image"):
        read_warned(path)


def test_a_row_group_of_images_decoding_past_the_group_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The footer says what a PNG is stored in, not what it decodes to: counted from the
    first image's header, before any is decoded."""
    frames = [png_bytes(np.zeros((16, 16, 3), np.uint8))] * 10  # 768 bytes each, 7,680 a group
    path = image_table(tmp_path / "images.parquet", frames)
    monkeypatch.setenv(GROUP_VARIABLE, "4000")
    with pytest.raises(
        FormatError, match=f"a row group decodes to 7,680 bytes.*set {GROUP_VARIABLE}"
    ):
        read_warned(path)


@pytest.mark.parametrize(
    ("name", "metadata", "words"),
    [
        ("ray.data.arrow_tensor", b"", "declares the extension type 'ray.data.arrow_tensor'"),
        ("arrow.fixed_shape_tensor", b'{"shape": [2, "x"]}', "declares shape"),
        (
            "arrow.fixed_shape_tensor",
            b'{"shape": [2, 3], "permutation": [0, 0]}',
            "declares permutation",
        ),
        ("arrow.fixed_shape_tensor", b"[[[[", "not valid JSON"),
    ],
    ids=["unknown", "bad-shape", "bad-permutation", "not-json"],
)
def test_extension_types_expcli_does_not_read_or_that_cannot_be_are_refused(
    tmp_path: Path, name: str, metadata: bytes, words: str
) -> None:
    table = pa.table({"observations": [[1.0] * 6, [2.0] * 6], "action": [0, 1]})
    kv = {b"ARROW:extension:name": name.encode(), b"ARROW:extension:metadata": metadata}
    field = pa.field("observations", pa.list_(pa.float32()), metadata=kv)
    path = declared_schema(
        tmp_path / "ext.parquet", table, pa.schema([field, ("action", pa.int64())])
    )
    with pytest.raises(FormatError, match=words):
        read_warned(path)


def test_a_damaged_stored_schema_declaring_an_extension_is_one_line(tmp_path: Path) -> None:
    table = pa.table({"observations": [1.0, 2.0]})
    junk = b"\xff\xff\xff\xff\x40\x00\x00\x00" + b"ARROW:extension:name" * 3
    path = tmp_path / "junk.parquet"
    with pq.ParquetWriter(path, table.schema, store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({"ARROW:schema": base64.b64encode(junk)})
    with pytest.raises(FormatError, match=r"its stored Arrow schema \(ARROW:schema\) is damaged"):
        read_warned(path)
