"""What a file's first bytes show: zip members, HDF5 and pickle signatures, text.

Each test answers for one kind of content; the format table names the format each one
tells (``Format.sniff``) and tries them in its order.
"""

from __future__ import annotations

import codecs
import csv
import re
import zipfile
from pathlib import Path

__all__ = [
    "SNIFF_BYTES",
    "is_arrow_ipc",
    "is_hdf5",
    "is_npy_zip",
    "is_parquet",
    "is_torch_file",
    "looks_like_csv",
    "looks_like_text",
]

SNIFF_BYTES = 64 * 1024
"""How many leading bytes ``sniff`` needs."""

_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_PARQUET_MAGIC = b"PAR1"
_ARROW_MAGIC = b"ARROW1"
_TORCH_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"  # pickled magic number
_CSV_HEADER_FIELD = re.compile(r".+\.\d+", re.DOTALL)


def is_torch_file(path: Path, head: bytes) -> bool:
    """A torch.save file: a zip archive holding a ``data.pkl``, or torch's legacy pickle."""
    if head.startswith(_TORCH_LEGACY_MAGIC):
        return True
    names = _zip_members(path, head)
    return names is not None and any(n == "data.pkl" or n.endswith("/data.pkl") for n in names)


def is_npy_zip(path: Path, head: bytes) -> bool:
    """A zip archive of ``.npy`` members only."""
    names = _zip_members(path, head)
    return names is not None and all(n.endswith(".npy") for n in names)


def is_hdf5(path: Path, head: bytes) -> bool:
    """The HDF5 signature."""
    return head.startswith(_HDF5_MAGIC)


def is_arrow_ipc(path: Path, head: bytes) -> bool:
    """The Arrow IPC file signature (``ARROW1``: Feather v2 too).

    An IPC *stream* (HF ``datasets``' cache files) has no signature: its suffix tells it.
    """
    return head.startswith(_ARROW_MAGIC)


def is_parquet(path: Path, head: bytes) -> bool:
    """The Parquet signature (``PAR1``; the reader checks the one at the end too)."""
    return head.startswith(_PARQUET_MAGIC)


def _zip_members(path: Path, head: bytes) -> list[str] | None:
    """The member names of a zip archive, or None when ``head`` does not start one."""
    if not head.startswith(_ZIP_MAGICS):
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()
    except Exception:  # sniffing is best effort; the reader reports what is wrong
        # Truncated: the member list at the end is gone; the first member's name is not.
        names = [_first_member(head)] if len(head) >= 30 else []
        return [n for n in names if n] or None


def _first_member(head: bytes) -> str:
    """Name of the first member in a zip local file header (torch writes data.pkl first)."""
    length = int.from_bytes(head[26:28], "little")
    return head[30 : 30 + length].decode("utf-8", errors="replace")


_LINE_BREAKS_AND_TABS = str.maketrans("", "", "\r\n\t")


def looks_like_text(head: bytes) -> bool:
    """Whether the first bytes are printable UTF-8 text (line breaks and tabs allowed)."""
    return _text(head) is not None


def _text(head: bytes) -> str | None:
    if b"\x00" in head:
        return None
    try:
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(head, final=False)
    except UnicodeDecodeError:
        return None
    if not text.translate(_LINE_BREAKS_AND_TABS).isprintable():  # one C call, not one per char
        return None
    return text


def looks_like_csv(path: Path, head: bytes) -> bool:
    """Printable UTF-8 text whose first line is a header of ``NAME.INDEX`` columns.

    That is the header expcli and skrl write. Other text with commas (a Python file, a
    config) is not taken for CSV by its content: a ``.csv`` suffix still names the format,
    and then the CSV reader says what is wrong with the header.
    """
    text = _text(head)
    if text is None:
        return False
    first_line, newline, _ = text.partition("\n")
    try:
        [fields] = list(csv.reader([first_line.rstrip("\r")])) or [[]]
    except csv.Error:
        return False
    if not newline and len(head) >= SNIFF_BYTES:
        fields = fields[:-1]  # the header goes on past the bytes read: its last field is cut
    return bool(fields) and all(_CSV_HEADER_FIELD.fullmatch(field) for field in fields)
