"""What a file's first bytes say its format is: zip members, HDF5 and pickle signatures, text."""

from __future__ import annotations

import codecs
import csv
import re
import zipfile
from pathlib import Path

__all__ = ["SNIFF_BYTES", "looks_like_text", "sniff"]

SNIFF_BYTES = 64 * 1024
"""How many leading bytes ``sniff`` needs."""

_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_TORCH_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19"  # pickled magic number
_CSV_HEADER_FIELD = re.compile(r".+\.\d+", re.DOTALL)


def sniff(path: Path, head: bytes) -> str | None:
    """The format the first bytes of a file show, or None."""
    if head.startswith(_ZIP_MAGICS):
        return _sniff_zip(path, head)
    if head.startswith(_HDF5_MAGIC):
        return "hdf5"
    if head.startswith(_TORCH_LEGACY_MAGIC):
        return "pt"
    return "csv" if _looks_like_csv(head) else None


def _sniff_zip(path: Path, head: bytes) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except Exception:  # sniffing is best effort; the reader reports what is wrong
        # Truncated: the member list at the end is gone; the first member's name is not.
        names = [_first_member(head)] if len(head) >= 30 else []
        names = [n for n in names if n]
        if not names:
            return None
    if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
        return "pt"
    if all(n.endswith(".npy") for n in names):
        return "npz"
    return None


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


def _looks_like_csv(head: bytes) -> bool:
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
