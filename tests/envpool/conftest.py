"""EnvPool's tests: a missing ``envpool`` skips them on a workstation and fails them in CI."""

from __future__ import annotations

import pytest

from tests.real_envs.needs import in_ci, missing_packages


@pytest.fixture
def envpool() -> object:
    """The ``envpool`` module (``make test`` installs the extra; CI must have it)."""
    if missing_packages(("envpool",)):
        reason = "needs envpool: pip install -e '.[envpool]' (make test does)"
        if in_ci():
            pytest.fail(f"{reason}; CI runs every EnvPool test, skipping none")
        pytest.skip(reason)
    from expcli.envs.envpool_envs import import_envpool

    return import_envpool()
