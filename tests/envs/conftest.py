"""Fixtures for the env tests: a ParallelEnv that is always closed."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from expcli import EnvError, ParallelEnv
from tests.envs.toy_envs import counting

LOCAL_MODES = ["dummy", "subproc"]

# A failure must be raised promptly, not after waiting out a timeout. A wall-clock bound
# near the real time flakes on a loaded machine (5.04 s against 5 did), so the tests that
# check it stretch the close timeouts to SLOW_CLOSE: a wrong path then takes a minute,
# while the right one stays under PROMPT however busy the machine.
SLOW_CLOSE = 60.0
PROMPT = 30.0


@pytest.fixture
def make_penv() -> Iterator[Callable[..., ParallelEnv]]:
    """Build ParallelEnvs that are closed at the end of the test, whatever happens."""
    made: list[ParallelEnv] = []

    def make(*args: Any, **kwargs: Any) -> ParallelEnv:
        penv = ParallelEnv(*args, **kwargs)
        made.append(penv)
        return penv

    yield make
    for penv in made:
        penv.close()


def counting_factories(n: int, horizons: list[int] | None = None, **kwargs: Any) -> list[Any]:
    horizons = horizons or [3 + i for i in range(n)]
    return [functools.partial(counting, horizon=horizons[i], tag=i, **kwargs) for i in range(n)]


def third_step_error(penv: ParallelEnv) -> tuple[EnvError, float]:
    """Reset, step twice; the ``EnvError`` the third step raises, and its seconds."""
    penv.reset()
    penv.step([0] * penv.num_envs)
    penv.step([0] * penv.num_envs)
    started = time.monotonic()
    with pytest.raises(EnvError) as caught:
        penv.step([0] * penv.num_envs)
    assert penv.closed
    return caught.value, time.monotonic() - started
