"""Decompression bombs: a 1.2 MB ``.npz`` whose member inflates to 1.2 GiB, and its HDF5 twin.

Both are built from one compressed block of zeros repeated (a full flush makes deflate blocks
that stand alone), so that making one takes a fraction of a second, not seconds of
compressing zeros. The npz is kept in memory once made.
"""

from __future__ import annotations

import functools
import io
import struct
import zlib
from pathlib import Path

import numpy as np

INFLATED_BYTES = 1200 << 20  # what the member holds once inflated: 1.2 GiB of zeros
_ROW_FLOATS = 1 << 16
_BLOCK = 16 << 20


@functools.cache
def bomb_npz(lying: bool) -> bytes:
    """The bomb; ``lying``: its header declares a thousand times more than it holds."""
    rows = INFLATED_BYTES // (_ROW_FLOATS * 4)
    declared = rows * 1000 if lying else rows
    header = {"descr": "<f4", "fortran_order": False, "shape": (declared, 1, _ROW_FLOATS)}
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, header)
    head = out.getvalue()
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    stream = [deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)]
    zeros = bytes(_BLOCK)
    block = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    count = INFLATED_BYTES // _BLOCK
    stream += [block] * count + [deflate.flush()]
    crc = zlib.crc32(head)
    for _ in range(count):
        crc = zlib.crc32(zeros, crc)
    return _zip(b"observations.npy", b"".join(stream), len(head) + INFLATED_BYTES, crc)


def _zip(name: bytes, raw: bytes, size: int, crc: int) -> bytes:
    """A zip archive of one deflated member (sizes under 4 GiB: no zip64 needed)."""
    local = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(raw), size, len(name), 0
    )
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(raw), size, len(name),
        0, 0, 0, 0, 0, 0,
    )  # fmt: skip
    end = struct.pack(
        "<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central) + len(name), len(local) + len(name)
        + len(raw), 0,
    )  # fmt: skip
    return local + name + raw + central + name + end


def bomb_h5(path: Path) -> Path:
    """An expcli ``.h5`` whose gzip-compressed tensors inflate to 1.2 GiB: each written as
    the same compressed chunk of zeros, all chunks present, the metadata agreeing."""
    import json

    import h5py

    rows = INFLATED_BYTES // (_ROW_FLOATS * 4)
    chunk_rows = _BLOCK // (_ROW_FLOATS * 4)
    chunk = zlib.compress(bytes(_BLOCK), 9)
    header = {
        "schema": "expcli/1",
        "num_envs": 1,
        "memory_size": rows,
        "memory_index": 0,
        "env_index": 0,
        "filled": True,
        "tensors": {"observations": {"dtype": "float32", "shape": [_ROW_FLOATS]}},
    }
    with h5py.File(path, "w") as h5:
        data = h5.create_dataset(
            "observations",
            shape=(rows, 1, _ROW_FLOATS),
            dtype="<f4",
            chunks=(chunk_rows, 1, _ROW_FLOATS),
            compression="gzip",
        )
        for first in range(0, rows, chunk_rows):
            data.id.write_direct_chunk((first, 0, 0), chunk)
        h5.attrs["expcli"] = json.dumps(header)
    return path
