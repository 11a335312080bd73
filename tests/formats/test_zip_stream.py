"""The streamed zip writer: CRC-32 combination against zlib, and archives every zip reader
accepts whose whole-file CRC equals the bytes on disk."""

from __future__ import annotations

import io
import shutil
import subprocess
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from expcli.formats import npz_format
from expcli.formats._zip_stream import ALIGNMENT, ZipStreamWriter, crc32_combine
from expcli.formats.dataset import Dataset
from expcli.formats.header import encode_header


@given(st.binary(max_size=300), st.binary(max_size=300))
@settings(max_examples=200, deadline=None)
def test_crc32_combine_equals_zlib_on_the_concatenation(a: bytes, b: bytes) -> None:
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)


def test_crc32_combine_with_lengths_past_32_bits() -> None:
    """Zeros doubled past 4 GiB: combining in two halves equals combining at once (zlib
    checks the doubling while it can still hash the zeros itself)."""
    zeros, n = zlib.crc32(bytes(1024)), 1024
    while n < 6 << 30:
        if n <= 1 << 20:
            assert zeros == zlib.crc32(bytes(n))
        half, zeros, n = zeros, crc32_combine(zeros, zeros, n), 2 * n
    head = zlib.crc32(b"expcli")
    in_halves = crc32_combine(crc32_combine(head, half, n // 2), half, n // 2)
    assert crc32_combine(head, zeros, n) == in_halves


@given(
    st.lists(
        st.tuples(st.text("abcé_/.0", min_size=1, max_size=12), st.binary(max_size=200)),
        min_size=1,
        max_size=6,
        unique_by=lambda r: r[0],
    )
)
@settings(max_examples=60, deadline=None)
def test_archive_reads_back_and_its_crc_is_the_files(records: list[tuple[str, bytes]]) -> None:
    out = io.BytesIO()
    writer = ZipStreamWriter(out)
    for name, data in records:
        writer.small(name.encode(), data)
    writer.close()
    raw = out.getvalue()
    assert (writer.size, writer.crc) == (len(raw), zlib.crc32(raw))
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:
        assert archive.testzip() is None
        assert [(i.filename, archive.read(i)) for i in archive.infolist()] == records
        for info in archive.infolist():
            if info.file_size:  # data starts aligned, so a reader may map it in place
                start = info.header_offset + 30 + len(info.filename.encode())
                at = info.header_offset + 28
                extra = int.from_bytes(raw[at : at + 2], "little")
                assert (start + extra) % ALIGNMENT == 0


def test_npz_written_by_the_stream_writer_loads_in_numpy_and_unzip(tmp_path: Path) -> None:
    tensors = {
        "observations": np.arange(24, dtype=np.float32).reshape(3, 2, 4),
        "actions": np.arange(6, dtype=np.int64).reshape(3, 2, 1),
    }
    dataset = Dataset(tensors)
    path = tmp_path / "d.npz"
    with open(path, "wb") as f:
        size, crc = npz_format.write_to(dataset, f, encode_header(dataset.header(), path))
    raw = path.read_bytes()
    assert (size, crc) == (len(raw), zlib.crc32(raw))
    with np.load(path) as loaded:  # allow_pickle stays False
        for name, array in tensors.items():
            np.testing.assert_array_equal(loaded[name], array)
    if shutil.which("unzip") is None:
        pytest.skip("no unzip on this machine")
    result = subprocess.run(["unzip", "-t", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
