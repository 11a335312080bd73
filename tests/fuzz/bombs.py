"""A deflate bomb in ``.npz`` form: a 1.2 MB archive whose member inflates to 1.2 GiB.

Made once per process (compressing the zeros takes a few seconds) and kept in memory.
"""

from __future__ import annotations

import functools
import io
import zipfile

import numpy as np

INFLATED_BYTES = 1200 << 20  # what the member holds once inflated: 1.2 GiB of zeros
_ROW_FLOATS = 1 << 16


@functools.cache
def bomb_npz(lying: bool) -> bytes:
    """The bomb; ``lying``: its header declares a thousand times more than it holds."""
    rows = INFLATED_BYTES // (_ROW_FLOATS * 4)
    declared = rows * 1000 if lying else rows
    header = {"descr": "<f4", "fortran_order": False, "shape": (declared, 1, _ROW_FLOATS)}
    out = io.BytesIO()
    zeros = bytes(16 << 20)
    with (
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive,
        archive.open("observations.npy", "w", force_zip64=True) as member,
    ):
        np.lib.format.write_array_header_1_0(member, header)
        for _ in range(INFLATED_BYTES // len(zeros)):
            member.write(zeros)
    return out.getvalue()
