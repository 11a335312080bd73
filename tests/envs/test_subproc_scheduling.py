"""How subproc workers share the machine: whole-batch fast paths, pinning, idling."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from expcli.envs._batching import covers_all
from expcli.envs.subproc_worker import usable_cpus
from tests.envs.conftest import LOCAL_MODES, counting_factories

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_covers_all_only_for_every_id_in_order() -> None:
    assert covers_all(np.arange(4), 4)
    assert not covers_all(np.array([0, 2, 1, 3]), 4)
    assert not covers_all(np.array([3, 2, 1, 0]), 4)
    assert not covers_all(np.arange(3), 4)
    assert not covers_all(np.arange(4, dtype=np.int32), 4)  # other dtype: the general path


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_every_id_in_another_order_keeps_that_order(para_mode: str, make_penv: Any) -> None:
    penv = make_penv(counting_factories(4, horizons=[50] * 4), para_mode, "continue", num_cpus=2)
    penv.reset(seed=0)
    obs, rewards, _, _, infos = penv.step([0, 1, 2, 0], id=[2, 0, 3, 1])
    assert obs[:, 2].tolist() == [2.0, 0.0, 3.0, 1.0]  # the tag column names each env
    assert rewards.tolist() == [1.0, 2.0, 3.0, 1.0]  # action + t, t = 1
    obs, rewards, _, _, infos = penv.step([0, 0, 0, 0], id=[3, 2, 1, 0])
    assert obs[:, 2].tolist() == [3.0, 2.0, 1.0, 0.0]
    assert [info.get("t") for info in infos] == [2, 2, 2, 2]


def worker_pids(penv: Any) -> list[int]:
    return [w.process.pid for w in penv._backend._workers]


def affinity(pid: int) -> set[int]:
    return os.sched_getaffinity(pid)


@linux_only
def test_workers_are_pinned_to_distinct_cpus(make_penv: Any) -> None:
    cpus = usable_cpus()
    penv = make_penv(counting_factories(2 * len(cpus)), "subproc", "restart")
    pins = [affinity(pid) for pid in worker_pids(penv)]
    assert pins == [{cpu} for cpu in cpus]
    assert affinity(0) == set(cpus)  # this process is left alone


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@linux_only
def test_idle_workers_stop_polling(make_penv: Any) -> None:
    penv = make_penv(counting_factories(4, horizons=[50] * 4), "subproc", "restart", num_cpus=2)
    penv.reset(seed=0)
    for _ in range(20):
        penv.step([0] * 4)
    time.sleep(0.2)  # past the polling window: the workers block on their pipes
    before = [cpu_seconds(pid) for pid in worker_pids(penv)]
    time.sleep(1.0)
    used = [cpu_seconds(pid) - b for pid, b in zip(worker_pids(penv), before, strict=True)]
    assert max(used) < 0.1, used
    obs, *_ = penv.step([0] * 4)  # and a blocked worker still answers
    assert obs[:, 0].tolist() == [21.0] * 4
