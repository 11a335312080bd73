"""The gist of a third-party library's error (torch, zipfile, h5py) for a one-line message."""

from __future__ import annotations

import re

__all__ = ["error_summary"]

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
