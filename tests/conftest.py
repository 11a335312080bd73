"""Suite-wide pytest hooks."""

from __future__ import annotations

import collections

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with the most ``slow`` tests first, the rest in the order they were collected.

    ``make test`` runs whole files on each xdist worker (``--dist loadfile``), handing them out
    in this order (``--no-loadscope-reorder``): a long file taken last would leave one worker
    running it alone while the others have finished. Longest first keeps the workers level.
    """
    slow = collections.Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path])  # stable: a file's tests keep their order
