"""Fixtures of the layout tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from expcli.formats import Dataset
from tests.formats.layouts.sample import make_dataset


@pytest.fixture
def dataset() -> Dataset:
    return make_dataset()


@pytest.fixture
def datasets_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty ``MINARI_DATASETS_PATH``, where ``minari.load_dataset`` looks."""
    root = tmp_path / "minari_datasets"
    root.mkdir()
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    return root
