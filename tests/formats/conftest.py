"""Helpers shared by the format tests."""

from __future__ import annotations

from pathlib import Path

from expcli.errors import ExpcliError
from expcli.formats import read_dataset


def assert_expcli_error_or_valid(path: Path) -> None:
    """Reading ``path`` either raises an expcli error naming a file or gives a dataset that
    passes its own checks: what every damaged or fuzzed file must do."""
    try:
        dataset = read_dataset(path)
    except ExpcliError as e:
        assert e.path is not None
    else:
        dataset.validate()
