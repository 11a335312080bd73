"""Tiny deterministic envs for the ParallelEnv tests (importable by worker processes)."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class CountingEnv(gym.Env[np.ndarray, int]):
    """obs = [t, start, tag]; reward = action + t; terminates after ``horizon`` steps.

    ``start`` is drawn from the reset seed, so seeding is visible in the observations.
    """

    def __init__(
        self, horizon: int = 5, tag: int = 0, fail_at: int | None = None, how: str = "raise"
    ) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float64)
        self.action_space = spaces.Discrete(3)
        self.horizon, self.tag, self.fail_at, self.how = horizon, tag, fail_at, how
        self.t, self.start, self.steps_total = 0, 0.0, 0
        self.greeting = "hello"

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        super().reset(seed=seed)
        self.t = 0
        self.start = float(self.np_random.integers(0, 1000))
        if options and "start" in options:
            self.start = float(options["start"])
        return self._obs(), {"start": self.start}

    def step(self, action: int):  # type: ignore[override]
        self.steps_total += 1
        if self.fail_at is not None and self.steps_total == self.fail_at:
            if self.how == "exit":
                os._exit(3)
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"boom at step {self.steps_total}")
        self.t += 1
        terminated = self.t >= self.horizon
        info = {"t": self.t} if self.t % 2 == 0 else {}
        return self._obs(), float(action) + self.t, terminated, False, info

    def _obs(self) -> np.ndarray:
        return np.array([self.t, self.start, self.tag], dtype=np.float64)

    def add(self, x: int, y: int = 0) -> int:
        return self.tag + x + y


class DictEnv(CountingEnv):
    """CountingEnv with a Dict observation space (not shareable through shared memory)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.observation_space = spaces.Dict(
            {"t": spaces.Discrete(100), "pos": spaces.Box(-np.inf, np.inf, (2,), np.float64)}
        )

    def _obs(self) -> dict[str, Any]:  # type: ignore[override]
        return {"t": self.t, "pos": np.array([self.start, self.tag], dtype=np.float64)}


def counting(horizon: int = 5, tag: int = 0, **kwargs: Any) -> CountingEnv:
    """A factory usable across processes."""
    return CountingEnv(horizon=horizon, tag=tag, **kwargs)


class MisbehavingEnv(CountingEnv):
    """CountingEnv that misbehaves from its step ``at`` on, as ``how`` says.

    Bad results: ``shape``, ``scalar_obs``, ``str_obs``, ``none_obs``, ``str_reward``,
    ``none_reward``, ``array_reward``, ``none_flag``, ``list_info``; ``float_obs`` (a
    float32 observation for the float64 Box) is fine. Hostile infos (for ``--infos``):
    ``huge_info`` (an int too large for a float), ``int_key_info``, ``empty_key_info``,
    ``late_info`` (a key that is None, then a string, then an array before it is a number
    from step ``at`` on). Hangs: ``loop`` (Python code),
    ``sleep``, ``c_sleep`` (in C, through ctypes), ``masked_sleep`` (SIGALRM blocked: as
    deaf as C code that never returns), ``slow`` (every step takes 0.3 s: never hung).
    """

    def __init__(self, how: str, at: int = 3, **kwargs: Any) -> None:
        super().__init__(**{"horizon": 100, **kwargs})
        self.misbehaviour, self.at = how, at

    def step(self, action: int):  # type: ignore[override]
        obs, reward, terminated, truncated, info = super().step(action)
        how = self.misbehaviour
        if how == "slow":
            time.sleep(0.3)
        if how == "late_info":
            before = [None, "n/a", np.zeros(2)][min(self.steps_total, 3) - 1]
            info = {**info, "late": before if self.steps_total < self.at else self.steps_total}
        if self.steps_total < self.at:
            return obs, reward, terminated, truncated, info
        if how == "loop":
            while True:
                pass
        if how == "sleep":
            time.sleep(3600)
        if how == "c_sleep":
            ctypes.CDLL(None).sleep(3600)
        if how == "masked_sleep":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            time.sleep(3600)
        bad: dict[str, Any] = {
            "shape": {"obs": obs[:2]},
            "scalar_obs": {"obs": 0.5},
            "str_obs": {"obs": "abc"},
            "none_obs": {"obs": None},
            "float_obs": {"obs": obs.astype(np.float32)},
            "str_reward": {"reward": "1.5"},
            "none_reward": {"reward": None},
            "array_reward": {"reward": np.array([reward])},
            "none_flag": {"terminated": None},
            "list_info": {"info": [1]},
            "huge_info": {"info": {**info, "huge": 10**400}},
            "int_key_info": {"info": {**info, 7: 1.0}},
            "empty_key_info": {"info": {**info, "": 1.0}},
            "nan_reward": {"reward": float("nan")},
            "inf_reward": {"reward": -float("inf")},
            "huge_reward": {"reward": 1e300},
            "int_reward": {"reward": 10**400},
            "int_flag": {"terminated": 1},
            "str_flag": {"terminated": "yes"},
            "array_flag": {"terminated": np.array([False])},
            "none_info": {"info": None},
        }.get(how, {})
        if how == "four_tuple":
            return obs, reward, terminated, info
        if how == "six_tuple":
            return obs, reward, terminated, truncated, info, None
        if how == "same_buffer":  # one array, changed in place at every step
            self._buffer = getattr(self, "_buffer", obs.copy())
            self._buffer[:] = obs
            obs = self._buffer
        if how == "print":
            print(f"step {self.steps_total}", flush=True)
        if how == "step_raises":
            raise RuntimeError("boom in step")
        if how == "exit":
            raise SystemExit(5)
        if how == "keyboard":
            raise KeyboardInterrupt
        result = {"obs": obs, "reward": reward, "terminated": terminated, "info": info, **bad}
        return result["obs"], result["reward"], result["terminated"], truncated, result["info"]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[override]
        how = self.misbehaviour if hasattr(self, "misbehaviour") else ""
        if how == "reset_raises" and self.steps_total >= self.at:
            raise RuntimeError("boom in reset")
        obs, info = super().reset(seed=seed, options=options)
        if how == "reset_shape":
            return obs[:2], info
        if how == "reset_none_info":
            return obs, None
        return obs, info

    def close(self) -> None:
        if self.misbehaviour == "close_raises":
            raise RuntimeError("boom in close")
        if self.misbehaviour == "close_hangs":
            time.sleep(3600)
        super().close()


def misbehaving(how: str, at: int = 3, tag: int = 0) -> MisbehavingEnv:
    """A factory usable across processes."""
    return MisbehavingEnv(how, at, tag=tag)


class ResetsSignalsOnClose(gym.Wrapper[Any, Any, Any, Any]):
    """A wrapper whose ``close`` puts SIGTERM back to its default, as Ray's shutdown does."""

    def close(self) -> None:
        super().close()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
