"""The ray and ray-subproc modes behave like the dummy mode, and fail loudly and cleanly.

One local Ray (2 CPUs) serves the whole module; each ParallelEnv starts its own actors.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from expcli import EnvError, MissingDependencyError, ParallelEnv
from expcli.envs import StepInterrupted, ray_backend
from expcli.envs.modes import AsyncMode
from tests.envs.conftest import PROMPT, SLOW_CLOSE, third_step_error
from tests.envs.toy_envs import misbehaving

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.ray

RAY_MODES = ["ray", "ray-subproc"]


@pytest.fixture(scope="module", autouse=True)
def ray_session() -> Any:
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


# ---------------------------------------------------------------- helper envs


class DictEnv(gym.Env[dict[str, Any], int]):
    """Dict observations, random episode ends and chatty infos, all from the seed."""

    observation_space = gym.spaces.Dict(
        {"pos": gym.spaces.Box(-1.0, 1.0, (2,)), "t": gym.spaces.Discrete(100)}
    )
    action_space = gym.spaces.Discrete(3)

    def __init__(self) -> None:
        self.label = "plain"
        self.t = 0

    def _obs(self) -> dict[str, Any]:
        return {"pos": self.np_random.uniform(-1, 1, 2).astype(np.float32), "t": self.t}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {"seeded": seed}

    def step(self, action: int) -> Any:
        self.t += 1
        reward = float(self.np_random.normal() + action)
        terminated = bool(self.np_random.random() < 0.1)
        truncated = self.t >= 12
        info = {"t": self.t} if self.t % 3 == 0 else {}
        return self._obs(), reward, terminated, truncated, info

    def describe(self, k: int = 1) -> tuple[str, int]:
        return self.label, self.t * k


class Faulty(gym.Env[np.ndarray, int]):
    """Raises (``fail_at``) or SIGKILLs its own process (``kill_at``) on that step.

    It never kills the process whose pid is ``spare``: the test runner.
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,))
    action_space = gym.spaces.Discrete(2)

    def __init__(self, fail_at: int = 0, kill_at: int = 0, spare: int = 0) -> None:
        self.fail_at, self.kill_at, self.spare = fail_at, kill_at, spare
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action: int) -> Any:
        self.t += 1
        if self.t == self.fail_at:
            raise RuntimeError(f"boom at step {self.t}")
        if self.t == self.kill_at and os.getpid() != self.spare:
            os.kill(os.getpid(), signal.SIGKILL)
        return np.full(3, self.t / 100, np.float32), 1.0, False, False, {}


def faulty_envs(n: int, bad: int, **kwargs: int) -> list[Any]:
    return [
        functools.partial(Faulty, **(kwargs if i == bad else {}), spare=os.getpid())
        for i in range(n)
    ]


def same(a: Any, b: Any) -> bool:
    """Equal values, types, dtypes and shapes, through dicts, lists and object arrays."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, np.ndarray):
        if not isinstance(b, np.ndarray) or a.dtype != b.dtype or a.shape != b.shape:
            return False
        return same(a.tolist(), b.tolist()) if a.dtype == object else bool(np.array_equal(a, b))
    return type(a) is type(b) and a == b


def by_hand(make: Any, n: int, seed: int, actions: list[list[int]]) -> list[Any]:
    """Gymnasium envs stepped in a loop, reset on episode end (the ``restart`` mode)."""
    envs = [make() for _ in range(n)]
    first = [env.reset(seed=seed + i) for i, env in enumerate(envs)]
    results: list[Any] = [first]
    for row in actions:
        step = []
        for env, action in zip(envs, row, strict=True):
            obs, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                info = {**info, "ended_state": obs, "reset": True}
                obs, reset_info = env.reset()
                if reset_info:
                    info["reset_info"] = reset_info
            step.append((obs, reward, terminated, truncated, info))
        results.append(step)
    return results


# ---------------------------------------------------------------------- tests


@pytest.mark.slow
@pytest.mark.parametrize("mode", RAY_MODES)
@pytest.mark.parametrize(
    "make", [functools.partial(gym.make, "CartPole-v1"), DictEnv], ids=["cartpole", "dict"]
)
def test_same_results_as_dummy_and_gymnasium(mode: str, make: Any) -> None:
    n, steps = 3, 50
    rng = np.random.default_rng(0)
    with ParallelEnv([make] * n, mode) as penv, ParallelEnv([make] * n, "dummy") as ref:
        for asynchronous in (None, *list(AsyncMode)[1:]):
            penv.asynchronous = ref.asynchronous = asynchronous
            first = penv.reset(seed=10)
            assert same(first, ref.reset(seed=10))
            history = [[(o, i) for o, i in zip(*first, strict=True)]]
            actions = rng.integers(0, 2, (steps, n)).tolist()
            for row in actions:
                result = penv.step(row)
                assert same(result, ref.step(row)), (asynchronous, row)
                obs, rewards, terminated, truncated, infos = result
                history.append(
                    list(
                        zip(
                            obs,
                            rewards.tolist(),
                            terminated.tolist(),
                            truncated.tolist(),
                            infos,
                            strict=True,
                        )
                    )
                )
            if asynchronous == "restart":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    assert same(history, by_hand(make, n, 10, actions))


@pytest.mark.parametrize("mode", RAY_MODES)
def test_every_method_matches_dummy(mode: str) -> None:
    with (
        ParallelEnv([DictEnv] * 4, mode, "continue") as penv,
        ParallelEnv([DictEnv] * 4, "dummy", "continue") as ref,
    ):
        assert penv.observation_space == ref.observation_space
        assert penv.action_space == ref.action_space
        for env in (penv, ref):
            env.reset(seed=1)
        assert same(penv.reset(id=[3, 0], seed=[5, 7]), ref.reset(id=[3, 0], seed=[5, 7]))
        assert same(penv.reset(id=2, seed=9), ref.reset(id=2, seed=9))
        assert same(penv.step([2, 0], id=[3, 1]), ref.step([2, 0], id=[3, 1]))
        assert same(penv.step(1, id=2), ref.step(1, id=2))
        assert same(penv.step([0, 1, 2, 1], align="batch"), ref.step([0, 1, 2, 1], align="batch"))
        penv.set_env_attr("label", "tagged", id=[1, 3])
        assert penv.get_env_attr("label") == ["plain", "tagged", "plain", "tagged"]
        assert penv.get_env_attr("t", id=3) == 2 and penv.get_env_attr("nothing") == [None] * 4
        assert penv.customized_method("describe", {"k": 10}, id=[3, 0]) == [
            ("tagged", 20),
            ("plain", 10),
        ]
        assert penv.customized_method("describe", [{"k": 5}, {}], id=[1, 2]) == [
            ("tagged", 10),
            ("plain", 2),
        ]
        with pytest.raises(EnvError, match="no method 'missing'") as info:
            penv.customized_method("missing", id=[2, 3])
        assert info.value.index == 2 and penv.closed


@pytest.mark.parametrize("mode", RAY_MODES)
def test_env_raising_in_a_worker_raises_env_error(
    mode: str, make_penv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ray_backend, "_CLOSE_TIMEOUT", SLOW_CLOSE)
    penv = make_penv(faulty_envs(4, bad=3, fail_at=3), mode)
    pids = _processes(ray.get([actor.pid.remote() for actor in penv._backend.actors]))
    penv.reset()
    for _ in range(2):
        penv.step([0] * 4)
    started = time.monotonic()
    with pytest.raises(
        EnvError, match=r"env 3: step\(\) raised RuntimeError: boom at step 3"
    ) as info:
        penv.step([0] * 4)
    assert time.monotonic() - started < PROMPT
    assert info.value.index == 3
    notes = "\n".join(info.value.__notes__)
    assert "Traceback" in notes and "boom at step 3" in notes and "in step" in notes
    assert penv.closed
    _assert_gone(pids)


def test_killed_actor_raises_env_error(make_penv: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_backend, "_CLOSE_TIMEOUT", SLOW_CLOSE)
    penv = make_penv([Faulty] * 4, "ray")
    penv.reset()
    pids = ray.get([actor.pid.remote() for actor in penv._backend.actors])
    family = _processes(pids)
    os.kill(pids[1], signal.SIGKILL)
    started = time.monotonic()
    with pytest.raises(EnvError, match=r"env 2: step\(\) failed: the Ray actor of envs 2..3 died"):
        penv.step([0] * 4)
    assert time.monotonic() - started < PROMPT
    assert penv.closed
    _assert_gone(family)


def test_restart_on_error_replaces_dead_actors_and_broken_envs(make_penv: Any) -> None:
    penv = make_penv(faulty_envs(4, bad=0, fail_at=2), "ray", "continue", restart_on_error=True)
    penv.reset()
    penv.step([0] * 4)
    os.kill(ray.get(penv._backend.actors[1].pid.remote()), signal.SIGKILL)
    obs, rewards, terminated, truncated, infos = penv.step([0, 1, 0, 1])
    assert truncated.tolist() == [True, False, True, True]
    assert not terminated.any() and rewards.tolist() == [0.0, 1.0, 0.0, 0.0]
    assert "boom at step 2" in infos[0]["env_error"] and infos[0]["reset"]
    assert "died" in infos[2]["env_error"] and "died" in infos[3]["env_error"]
    assert obs[2:].tolist() == [[0.0] * 3] * 2  # the reset observation
    assert penv.restarts == 3
    obs, *_ = penv.step([0] * 4)
    assert obs.flags.writeable
    assert np.allclose(obs[:, 0], [0.01, 0.03, 0.01, 0.01])


def test_ray_subproc_worker_killed_and_restarted() -> None:
    with ParallelEnv(
        faulty_envs(3, bad=2, kill_at=2), "ray-subproc", restart_on_error=True
    ) as penv:
        penv.reset()
        penv.step([0] * 3)
        _, _, _, truncated, infos = penv.step([0] * 3)
        assert truncated.any() and "env_error" in infos[2] and penv.restarts > 0
    with ParallelEnv(faulty_envs(3, bad=2, kill_at=2), "ray-subproc") as penv:
        penv.reset()
        penv.step([0] * 3)
        with pytest.raises(EnvError, match="killed by SIGKILL"):
            penv.step([0] * 3)
        assert penv.closed


def test_close_twice_and_use_after_close() -> None:
    penv = ParallelEnv([Faulty] * 2, "ray")
    penv.close()
    penv.close()
    assert penv.closed
    with pytest.raises(EnvError, match="closed"):
        penv.step([0, 0])


def test_a_ray_started_by_the_backends_stops_with_the_last_one() -> None:
    script = """
import ray
from expcli import ParallelEnv
a = ParallelEnv.from_id("CartPole-v1", 2, "ray", num_cpus=1)
b = ParallelEnv.from_id("CartPole-v1", 1, "ray")
a.close()
b.reset()
assert ray.is_initialized() and b.step([0])[1].tolist() == [1.0]
b.close()
assert not ray.is_initialized()
"""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    process = subprocess.Popen(
        [sys.executable, "-c", script], stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)  # lets Ray's atexit stop its processes
        _, stderr = process.communicate(timeout=30)
        pytest.fail(f"the script hung:\n{stderr[-3000:]}")
    assert process.returncode == 0, stderr[-3000:]


def _misbehaving(how: str, bad: int, n: int = 4) -> list[Any]:
    return [
        functools.partial(misbehaving, how if i == bad else "none", at=3, tag=i) for i in range(n)
    ]


@pytest.mark.parametrize("mode", RAY_MODES)
def test_a_bad_result_is_refused_as_in_dummy(mode: str, make_penv: Any) -> None:
    error, _ = third_step_error(make_penv(_misbehaving("none_obs", bad=3), mode))
    expected, _ = third_step_error(make_penv(_misbehaving("none_obs", bad=3), "dummy"))
    assert str(error) == str(expected) and error.index == 3
    assert "step() returned None as the observation" in str(error)


@pytest.mark.parametrize("mode", RAY_MODES)
def test_a_hung_env_is_reported_after_the_step_timeout(
    mode: str, make_penv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The actor gives up by itself; the driver's own kill (past _HUNG_MARGIN) is the wrong path.
    monkeypatch.setattr(ray_backend, "_HUNG_MARGIN", SLOW_CLOSE)
    monkeypatch.setattr(ray_backend, "_CLOSE_TIMEOUT", SLOW_CLOSE)
    penv = make_penv(_misbehaving("loop", bad=3), mode, step_timeout=0.5)
    pids = _processes(ray.get([actor.pid.remote() for actor in penv._backend.actors]))
    error, seconds = third_step_error(penv)
    assert seconds < PROMPT
    assert error.index == 3 and "step() did not return within 0.5 s" in str(error)
    _assert_gone(pids)


def test_an_actor_deaf_to_its_watchdog_is_stopped_by_the_driver(
    make_penv: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from expcli.envs import ray_backend

    monkeypatch.setattr(ray_backend, "_HUNG_MARGIN", 1.0)
    penv = make_penv(_misbehaving("masked_sleep", bad=3), "ray", step_timeout=0.5)
    pids = _processes(ray.get([actor.pid.remote() for actor in penv._backend.actors]))
    error, _ = third_step_error(penv)
    assert error.index == 2 and "the Ray actor of envs 2..3 did not answer within 2 s" in str(error)
    _assert_gone(pids)


def test_interrupt_gives_up_on_a_hung_actor(make_penv: Any) -> None:
    penv = make_penv(_misbehaving("masked_sleep", bad=0), "ray")
    pids = _processes(ray.get([actor.pid.remote() for actor in penv._backend.actors]))
    penv.reset()
    penv.step([0] * 4)
    penv.step([0] * 4)
    threading.Timer(0.3, penv.interrupt).start()
    with pytest.raises(StepInterrupted):
        penv.step([0] * 4)
    assert penv.closed
    _assert_gone(pids)


def test_missing_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"expcli\[ray\]"):
        ParallelEnv([Faulty], "ray")


def _processes(roots: list[int]) -> set[int]:
    """The processes ``roots`` and all their descendants (from Linux's /proc)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    family = set(roots)
    while grown := {pid for pid, parent in parents.items() if parent in family} - family:
        family |= grown
    return family


def _assert_gone(pids: set[int]) -> None:
    """Every process in ``pids`` exits (or is a zombie) within 10 seconds."""
    deadline = time.monotonic() + 10
    while (alive := {pid for pid in pids if _alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive, f"processes outlived close(): {sorted(alive)}"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
