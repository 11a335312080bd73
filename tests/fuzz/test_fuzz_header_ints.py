"""Every integer of every header of the seed corpus set to an edge of 64 bits, through
``inspect --json``, ``inspect --check`` and ``convert``: read, or refused in one line.
"""

from __future__ import annotations

import json

import pytest

from tests.fuzz import header_ints
from tests.fuzz.campaign import Settings, run_campaign


@pytest.mark.slow
def test_every_header_integer_at_an_edge_is_read_or_refused_in_one_line() -> None:
    """Each integer of every header of every seed (437 of them) set to an edge of 64 bits.

    ``header_ints``: ``written`` of 2**70 in a Parquet footer gave an ``OverflowError``
    traceback in ``inspect``; a LeRobot sidecar's tensor shape of 2**62 a numpy one.
    """
    fields = header_ints.fields()
    assert len({(f.seed, f.header) for f in fields}) >= 25  # every kind of header is there
    report = run_campaign(Settings(files=len(fields), header_ints=True, workers=2, timeout=20))
    assert report.outcomes["error"] > 0 and report.outcomes["ok"] > 0
    if report.bad:
        shown = json.dumps(report.failures[:10], indent=1)
        pytest.fail(f"{report.table()}\n{shown}")
