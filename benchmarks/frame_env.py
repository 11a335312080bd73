"""A synthetic env that is never the bottleneck: a constant uint8 frame, a fixed-length
episode. Importing this module registers ``ConstantFrame-v0`` (84x84x4 by default;
``shape`` kwarg), so ``expcli collect benchmarks.frame_env:ConstantFrame-v0`` finds it, and
``NoisyFrames-v0``: the same, cycling through frames that do not compress to nothing, and
``PongFrames-v0``: real Pong screens (ale_py), 84x84 grayscale stacked by four, recorded once
and replayed, so that stepping costs next to nothing while the frames compress as Atari's."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class ConstantFrame(gym.Env[np.ndarray, np.int64]):
    """Returns the same frame every step; episodes last ``length`` steps."""

    def __init__(self, shape: tuple[int, ...] = (84, 84, 4), length: int = 1000) -> None:
        self.observation_space = gym.spaces.Box(0, 255, tuple(shape), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self._frame = np.full(tuple(shape), 7, np.uint8)
        self._length, self._t = length, 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._frame, {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        return self._frame, 1.0, False, self._t >= self._length, {}


class NoisyFrames(ConstantFrame):
    """Cycles through ``count`` frames that compress as Atari frames roughly do.

    Mostly background, with a 40x60 patch of 2-bit noise (``benchmarks/parquet.py``'s frames),
    drawn anew from the seed of each reset, so that envs seeded apart differ: a compressing
    writer has real work, unlike with one constant frame.
    """

    def __init__(
        self, shape: tuple[int, ...] = (84, 84, 4), length: int = 1000, count: int = 64
    ) -> None:
        super().__init__(shape, length)
        self._shape, self._count = tuple(shape), count
        self._frames = self._draw(0)

    def _draw(self, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        frames = np.zeros((self._count, *self._shape), np.uint8)
        patch = (self._count, 40, 60, *self._shape[2:])
        frames[:, 20:60, 10:70] = rng.integers(0, 4, patch, dtype=np.uint8) * 60
        return frames

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed, options=options)
        if seed is not None:
            self._frames = self._draw(seed)
        return self._frames[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        _, reward, terminated, truncated, info = super().step(action)
        return self._frames[self._t % self._count], reward, terminated, truncated, info


class PongFrames(ConstantFrame):
    """Replays ``count`` stacks of real Pong screens (84x84 grayscale, four a stack).

    The screens are played once per process by ALE with random actions, subsampled to
    84x84 (nearest rows and columns: no OpenCV needed); each env starts at an offset drawn
    from its reset seed, so that envs differ as a vector of Atari envs does.
    """

    _recorded: np.ndarray | None = None

    def __init__(self, length: int = 1000, count: int = 512) -> None:
        super().__init__((4, 84, 84), length)
        self._stacks = self._record(count)
        self._offset = 0

    @classmethod
    def _record(cls, count: int) -> np.ndarray:
        if cls._recorded is None or len(cls._recorded) < count:
            import ale_py

            gym.register_envs(ale_py)
            env = gym.make("ALE/Pong-v5", obs_type="grayscale")
            rows, cols = np.linspace(0, 209, 84).astype(int), np.linspace(0, 159, 84).astype(int)
            screens = []
            screen, _ = env.reset(seed=0)
            for _ in range(count + 3):
                screens.append(screen[rows][:, cols])
                screen, _, terminated, truncated, _ = env.step(env.action_space.sample())
                if terminated or truncated:
                    screen, _ = env.reset()
            env.close()
            cls._recorded = np.stack([np.stack(screens[i : i + 4]) for i in range(count)])
        return cls._recorded[:count]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed, options=options)
        if seed is not None:
            self._offset = int(np.random.default_rng(seed).integers(len(self._stacks)))
        return self._stacks[self._offset], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        _, reward, terminated, truncated, info = super().step(action)
        frame = self._stacks[(self._offset + self._t) % len(self._stacks)]
        return frame, reward, terminated, truncated, info


if "ConstantFrame-v0" not in gym.registry:
    gym.register("ConstantFrame-v0", entry_point=ConstantFrame)
if "NoisyFrames-v0" not in gym.registry:
    gym.register("NoisyFrames-v0", entry_point=NoisyFrames)
if "PongFrames-v0" not in gym.registry:
    gym.register("PongFrames-v0", entry_point=PongFrames)
