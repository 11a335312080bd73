"""Fixtures of the layout tests."""

from __future__ import annotations

import pytest

from expcli.formats import Dataset
from tests.formats.layouts.sample import make_dataset


@pytest.fixture
def dataset() -> Dataset:
    return make_dataset()
