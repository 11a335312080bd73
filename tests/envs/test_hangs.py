"""An env that hangs: the step timeout reports it (or restarts it), ``interrupt()`` gives
up on it, and no worker is left behind."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from expcli import ConfigError, ParallelEnv, load
from expcli.cli.app import app
from expcli.envs import StepInterrupted, worker_handle
from tests.envs.conftest import LOCAL_MODES, PROMPT, SLOW_CLOSE, third_step_error
from tests.envs.misbehaving_ids import MISBEHAVING_ID
from tests.envs.test_faults import child_pids
from tests.envs.toy_envs import misbehaving

# Where dummy mode can give up: Python code, a sleep, a C call that a signal ends.
HANGS = {"dummy": ["loop", "sleep", "c_sleep"], "subproc": ["loop", "c_sleep"]}


def _factories(how: str, n: int = 4, hung: int = 2, at: int = 3) -> list[Any]:
    return [
        functools.partial(misbehaving, how if i == hung else "none", at=at, tag=i) for i in range(n)
    ]


@pytest.mark.parametrize(("para_mode", "how"), [(m, how) for m in LOCAL_MODES for how in HANGS[m]])
def test_a_hung_env_is_reported_after_the_step_timeout(
    para_mode: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_handle, "_CLOSE_TIMEOUT", SLOW_CLOSE)
    before = child_pids()
    penv = ParallelEnv(_factories(how), para_mode, "restart", num_cpus=2, step_timeout=0.5)
    error, seconds = third_step_error(penv)
    assert 0.5 <= seconds < PROMPT
    assert error.index == 2 and "step() did not return within 0.5 s" in str(error)
    assert child_pids() <= before


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_restart_on_error_restarts_a_hung_env(para_mode: str) -> None:
    factories = _factories("loop", n=2, hung=0, at=2)
    with ParallelEnv(
        factories, para_mode, "restart", num_cpus=2, restart_on_error=True, step_timeout=0.5
    ) as penv:
        penv.reset()
        penv.step([0, 0])
        obs, _, _, truncated, infos = penv.step([0, 0])
        assert truncated.tolist() == [True, False]
        assert "did not return within 0.5 s" in infos[0]["env_error"]
        assert obs[:, 0].tolist() == [0.0, 2.0] and penv.restarts == 1
        obs, *_ = penv.step([0, 0])  # the new env counts from its reset
        assert obs[:, 0].tolist() == [1.0, 3.0]


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_a_slow_env_is_not_hung(para_mode: str) -> None:
    """The timeout is per env: one worker stepping 3 envs of 0.3 s each takes 0.9 s."""
    factories = [functools.partial(misbehaving, "slow", tag=i) for i in range(3)]
    with ParallelEnv(factories, para_mode, "restart", num_cpus=1, step_timeout=0.6) as penv:
        penv.reset()
        obs, *_ = penv.step([0, 0, 0])
        assert obs[:, 0].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_interrupt_gives_up_on_a_hung_step(para_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_handle, "_CLOSE_TIMEOUT", SLOW_CLOSE)
    before = child_pids()
    penv = ParallelEnv(_factories("loop", n=2, hung=1), para_mode, "restart", num_cpus=2)
    penv.reset()
    penv.step([0, 0])
    penv.step([0, 0])
    timer = threading.Timer(0.3, penv.interrupt)
    timer.start()
    started = time.monotonic()
    with pytest.raises(StepInterrupted):
        penv.step([0, 0])
    assert 1.3 <= time.monotonic() - started < PROMPT  # the grace is waited out
    assert penv.closed and child_pids() <= before


@pytest.mark.parametrize("para_mode", LOCAL_MODES)
def test_interrupt_lets_quick_steps_finish(para_mode: str) -> None:
    with ParallelEnv(_factories("none", n=2), para_mode, "restart", num_cpus=2) as penv:
        penv.reset()
        penv.interrupt()
        for _ in range(5):
            obs, *_ = penv.step([0, 0])
        assert obs[:, 0].tolist() == [5.0, 5.0]


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), "5", True])
def test_a_bad_step_timeout_is_a_config_error(value: Any) -> None:
    with pytest.raises(ConfigError, match="step_timeout"):
        ParallelEnv(_factories("none", n=1), "dummy", step_timeout=value)


def test_zero_means_no_timeout() -> None:
    with ParallelEnv(_factories("none", n=1), "dummy", step_timeout=0) as penv:
        assert penv.step_timeout is None
        penv.reset()
        assert np.asarray(penv.step([0])[0]).shape == (1, 3)


@pytest.mark.parametrize("mode", LOCAL_MODES)
def test_collect_reports_a_hung_env_and_saves_what_came_before(tmp_path: Any, mode: str) -> None:
    out = tmp_path / "hung.npz"
    kwargs = '{"how": "loop", "at": 5}'
    result = CliRunner().invoke(
        app,
        ["collect", MISBEHAVING_ID, "--env-kwargs", kwargs, "--envs", "2", "--steps", "100"]
        + ["--mode", mode, "--step-timeout", "0.5", "-o", str(out)],
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.stderr
    assert "\nerror: env 0: step() did not return within 0.5 s (step timeout)" in result.stderr
    assert "saved the 8 transitions" in result.stderr and len(load(out)) == 8


@pytest.mark.parametrize("value", ["-3", "soon", "nan"])
def test_collect_refuses_a_bad_step_timeout(value: str) -> None:
    result = CliRunner().invoke(app, ["collect", "CartPole-v1", "--step-timeout", value])
    assert result.exit_code == 2
    assert "--step-timeout must be seconds (0 or none: no limit)" in result.stderr


@pytest.mark.parametrize(
    ("text", "seconds"), [("step-timeout = 2.5", 2.5), ('step_timeout = "none"', None)]
)
def test_the_step_timeout_in_a_config_file(tmp_path: Any, text: str, seconds: float | None) -> None:
    from expcli.collect.settings import CollectSettings, read_config

    config = tmp_path / "run.toml"
    config.write_text(f'env = "CartPole-v1"\n{text}\n')
    assert CollectSettings(**read_config(config)).validate().step_timeout == seconds
