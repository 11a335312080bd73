"""Env failures, dead workers, restarts, and clean shutdown in the local modes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from expcli import EnvError, ParallelEnv
from expcli.envs import worker_handle
from tests.envs.conftest import LOCAL_MODES, PROMPT, SLOW_CLOSE, counting_factories


def child_pids() -> set[int]:
    """Live (non-zombie) child processes of this process, read from /proc.

    multiprocessing's resource tracker, which spawn starts once and which lives as long as
    the interpreter, is not counted.
    """
    me, children = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            cmdline = (entry / "cmdline").read_bytes()
            if b"resource_tracker" not in cmdline:
                children.add(int(entry.name))
    return children


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_an_env_that_raises_gives_env_error_and_closes_everything(
    para_mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_handle, "_CLOSE_TIMEOUT", SLOW_CLOSE)
    before_children, before_shm = child_pids(), shm_entries()
    factories = counting_factories(4, horizons=[100] * 4)
    factories[2] = counting_factories(3, horizons=[100] * 3, fail_at=3)[2]
    penv = ParallelEnv(factories, para_mode, "restart", num_cpus=2)
    penv.reset()
    penv.step([0] * 4)
    penv.step([0] * 4)
    started = time.monotonic()
    with pytest.raises(EnvError) as caught:
        penv.step([0] * 4)
    assert time.monotonic() - started < PROMPT
    error = caught.value
    assert error.index == 2 and "step()" in str(error) and "boom at step 3" in str(error)
    assert any("Traceback" in note and "RuntimeError" in note for note in error.__notes__)
    assert penv.closed
    assert child_pids() <= before_children and shm_entries() <= before_shm
    penv.close()  # still fine


@pytest.mark.parametrize("how", ["kill", "exit"])
def test_a_dead_worker_is_reported(how: str) -> None:
    factories = counting_factories(4, horizons=[100] * 4)
    factories[3] = counting_factories(4, horizons=[100] * 4, fail_at=2, how=how)[3]
    penv = ParallelEnv(factories, "subproc", "restart", num_cpus=2)
    penv.reset()
    penv.step([0] * 4)
    with pytest.raises(EnvError) as caught:
        penv.step([0] * 4)
    message = str(caught.value)
    assert "worker process 1 (envs 2..3)" in message
    assert ("SIGKILL" in message) if how == "kill" else ("code 3" in message)
    assert caught.value.index == 2
    assert penv.closed and not child_pids()


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_restart_on_error_truncates_and_goes_on(para_mode: str) -> None:
    factories = counting_factories(3, horizons=[100] * 3)
    factories[1] = counting_factories(3, horizons=[100] * 3, fail_at=2)[1]
    with ParallelEnv(factories, para_mode, "restart", num_cpus=2, restart_on_error=True) as penv:
        penv.reset(seed=0)
        penv.step([0, 0, 0])
        obs, rewards, terminated, truncated, infos = penv.step([0, 0, 0])
        assert truncated.tolist() == [False, True, False] and not terminated.any()
        assert "boom at step 2" in infos[1]["env_error"] and infos[1]["reset"] is True
        assert obs[1, 0] == 0.0 and rewards[1] == 0.0 and obs[0, 0] == 2.0
        assert penv.restarts == 1
        obs, *_ = penv.step([0, 0, 0])
        assert obs[:, 0].tolist() == [3.0, 1.0, 3.0]


def test_restart_on_error_replaces_a_killed_worker() -> None:
    factories = counting_factories(4, horizons=[100] * 4)
    factories[0] = counting_factories(4, horizons=[100] * 4, fail_at=2, how="kill")[0]
    with ParallelEnv(factories, "subproc", "continue", num_cpus=2, restart_on_error=True) as penv:
        penv.reset()
        penv.step([0] * 4)
        obs, _, _, truncated, infos = penv.step([0] * 4)
        assert truncated.tolist() == [True, True, False, False]
        assert "SIGKILL" in infos[0]["env_error"] and "SIGKILL" in infos[1]["env_error"]
        assert obs[:2, 0].tolist() == [0.0, 0.0] and obs[2:, 0].tolist() == [2.0, 2.0]
        assert penv.restarts == 2
        obs, *_ = penv.step([0] * 4)  # the new worker's env 0 counts steps from scratch
        assert obs[:, 0].tolist() == [1.0, 1.0, 3.0, 3.0]


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_a_factory_that_fails_is_reported_at_construction(para_mode: str) -> None:
    def broken() -> Any:
        raise ValueError("no such robot")

    factories: list[Any] = counting_factories(2)
    factories.append(broken)
    with pytest.raises(EnvError) as caught:
        ParallelEnv(factories, para_mode, num_cpus=2)
    assert (
        caught.value.index == 2
        and "make()" in str(caught.value)
        and "no such robot" in str(caught.value)
    )
    assert not child_pids()


def test_a_missing_method_is_an_env_error() -> None:
    with (
        ParallelEnv(counting_factories(2), "subproc") as penv,
        pytest.raises(EnvError, match="no method"),
    ):
        penv.customized_method("fly")


def test_close_leaves_no_process_nor_shared_memory() -> None:
    before_shm = shm_entries()
    penv = ParallelEnv.from_id("CartPole-v1", 4, "subproc", "restart", num_cpus=2)
    penv.reset()
    penv.step(np.zeros(4, int))
    assert len(child_pids()) == 2
    penv.close()
    penv.close()
    assert not child_pids() and shm_entries() <= before_shm


def test_workers_end_when_the_program_exits_without_close(tmp_path: Path) -> None:
    script = tmp_path / "leave.py"
    script.write_text(
        textwrap.dedent("""
        import multiprocessing, sys
        from expcli import ParallelEnv
        if __name__ == "__main__":
            penv = ParallelEnv.from_id("CartPole-v1", 2, "subproc", num_cpus=2)
            penv.reset()
            print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
    """)
    )
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 0, out.stderr
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    time.sleep(0.2)
    for pid in pids:
        assert (
            not Path(f"/proc/{pid}").exists()
            or "Z" in (Path(f"/proc/{pid}/stat").read_text().split()[2])
        )


def test_a_script_without_main_guard_is_told_why_workers_fail(tmp_path: Path) -> None:
    script = tmp_path / "no_guard.py"
    script.write_text(
        "from expcli import ParallelEnv\n"
        "ParallelEnv.from_id('CartPole-v1', num_envs=2, para_mode='subproc').close()\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "EnvError" in last and "during start" in last
    assert 'if __name__ == "__main__":' in last


_UNGUARDED = """
import gymnasium as gym
from expcli import ParallelEnv

class Doubled(gym.RewardWrapper):  # defined in the main module, which workers cannot import
    def reward(self, reward):
        return 2 * reward

penv = ParallelEnv([lambda: Doubled(gym.make("CartPole-v1"))] * 2, "subproc", num_cpus=2)
penv.reset(seed=0)
print(penv.step([0, 1])[1].tolist())
penv.close()
"""


@pytest.mark.parametrize("how", ["stdin", "-c"])
def test_workers_start_when_the_main_module_is_not_a_file(how: str) -> None:
    """Code piped to ``python -`` or given to ``python -c``: spawn must not look for a file."""
    args, stdin = (
        ([sys.executable, "-"], _UNGUARDED)
        if how == "stdin"
        else (
            [sys.executable, "-c", _UNGUARDED],
            None,
        )
    )
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[2.0,", "2.0]"]


def test_hung_workers_die_with_their_parent(tmp_path: Path) -> None:
    """Workers ignore SIGTERM, so a parent killed with SIGKILL must take them along."""
    script = tmp_path / "orphans.py"
    script.write_text(
        textwrap.dedent("""
        import functools, multiprocessing
        from expcli import ParallelEnv
        from tests.envs.toy_envs import misbehaving
        if __name__ == "__main__":
            factory = functools.partial(misbehaving, "loop", at=1)
            penv = ParallelEnv([factory] * 2, "subproc", num_cpus=2)
            penv.reset()
            print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
            penv.step([0, 0])  # hangs
    """)
    )
    parent = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert parent.stdout is not None
        workers = [int(p) for p in parent.stdout.readline().split()]
        time.sleep(0.5)
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
    deadline = time.monotonic() + 5
    while (alive := [p for p in workers if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert len(workers) == 2 and not alive


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
