"""The gist of a third-party library's error (torch, zipfile, h5py) for a one-line message."""

from __future__ import annotations

import os
import re

from expcli.errors import FormatError

__all__ = ["error_summary", "unreadable_group"]

_ADVICE = re.compile(r"weights_only|Weights only load failed|documentation of torch\.load")


def error_summary(error: BaseException) -> str:
    """A library error's gist for a one-line message: its first informative sentence.

    Lines of advice (such as torch's suggestion to retry with ``weights_only=False``) are
    skipped; so are ANSI colours and a trailing full stop.
    """
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    useful = [line for line in lines if not _ADVICE.search(line)] or lines or [""]
    line = useful[0].removeprefix("WeightsUnpickler error:").strip()
    first = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0].strip().rstrip(".")
    return first or type(error).__name__


def unreadable_group(
    error: BaseException, path: str | os.PathLike[str], column: str, group: int
) -> FormatError:
    """The one line for a Parquet row group that pyarrow could not decode: the file is damaged."""
    return FormatError(
        f"row group {group} cannot be read ({error_summary(error)}); the file is damaged",
        path=path,
        key=column,
    )
