"""Datasets recorded by stepping gymnasium envs by hand: the oracle's own check.

Each async mode is written out literally (a ``none`` run cuts and resets everyone, an
``idle`` env really waits), leaves are laid out as decided, and the result is saved with
expcli's public ``save`` in expcli's schema. The oracle must replay these files, and must
reject them once a value is changed.
"""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from expcli import Dataset, save
from expcli.spec import CircularState

__all__ = ["record"]


def record(
    env_id: str,
    folder: Path,
    *,
    num_envs: int = 3,
    rows: int = 60,
    seed: int = 11,
    asynchronous: str = "restart",
    wrappers: tuple[str, ...] = (),
    env_kwargs: dict[str, Any] | None = None,
    store_autoreset: bool = False,
) -> Path:
    """Step ``num_envs`` envs with random actions into ``rows`` complete rows; save as npz.

    ``store_autoreset`` records, wrongly, the reset after an episode's end as a transition
    (what a naive vector-env collector stores): the oracle must reject that file.
    """
    module, _, name = env_id.rpartition(":")
    if module:
        importlib.import_module(module)
    kwargs = env_kwargs or {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        envs = []
        for _ in range(num_envs):
            env = gym.make(name, **kwargs)
            for spec in wrappers:
                wrap_module, _, wrap_name = spec.partition(":")
                env = getattr(importlib.import_module(wrap_module), wrap_name)(env)
            envs.append(env)
        for i, env in enumerate(envs):
            env.action_space.seed(seed + 1000 + i)
        columns = _STEPPERS[asynchronous](envs, seed, rows, store_autoreset)
        observation_space, action_space = envs[0].observation_space, envs[0].action_space
        for env in envs:
            env.close()
    tensors = _tensors(columns, rows, observation_space, action_space)
    metadata = {
        "env_id": env_id,
        "env_kwargs": kwargs,
        "seed": seed,
        "collector": {"mode": "dummy", "asynchronous": asynchronous, "steps": rows * num_envs},
    }
    if wrappers:
        metadata["wrappers"] = list(wrappers)
    path = folder / f"{name.replace('/', '-')}-{asynchronous}-by-hand.npz"
    save(Dataset(tensors, CircularState(0, 0, True), metadata), path)
    return path


Transition = tuple[Any, Any, float, bool, bool, Any]  # obs, action, reward, term, trunc, next


def _restart(envs: list[Any], seed: int, rows: int, autoreset: bool) -> list[list[Transition]]:
    """Each env on its own: reset (unseeded) right after every episode end."""
    columns: list[list[Transition]] = []
    for i, env in enumerate(envs):
        column: list[Transition] = []
        obs, _ = env.reset(seed=seed + i)
        while len(column) < rows:
            action = env.action_space.sample()
            next_obs, reward, terminated, truncated, _ = env.step(action)
            column.append((obs, action, reward, terminated, truncated, next_obs))
            obs = next_obs
            if terminated or truncated:
                obs, _ = env.reset()
                if autoreset:
                    column.append((next_obs, action, 0.0, False, False, obs))
        columns.append(column[:rows])
    return columns


def _continue(envs: list[Any], seed: int, rows: int, _: bool) -> list[list[Transition]]:
    """Each env steps on through its episode ends, never reset after the first."""
    columns: list[list[Transition]] = []
    for i, env in enumerate(envs):
        column: list[Transition] = []
        obs, _ = env.reset(seed=seed + i)
        for _ in range(rows):
            action = env.action_space.sample()
            next_obs, reward, terminated, truncated, _ = env.step(action)
            column.append((obs, action, reward, terminated, truncated, next_obs))
            obs = next_obs
        columns.append(column)
    return columns


def _none(envs: list[Any], seed: int, rows: int, _: bool) -> list[list[Transition]]:
    """In step: when one env ends, the others are cut (truncated) and every env resets."""
    columns: list[list[Transition]] = [[] for _ in envs]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    for _ in range(rows):
        steps = []
        for env, o in zip(envs, obs, strict=True):
            action = env.action_space.sample()
            steps.append((o, action, *env.step(action)))
        someone_ended = any(s[4] or s[5] for s in steps)
        for column, (o, action, next_obs, reward, terminated, truncated, _) in zip(
            columns, steps, strict=True
        ):
            cut = someone_ended and not terminated and not truncated
            column.append((o, action, reward, terminated, truncated or cut, next_obs))
        if someone_ended:
            obs = [env.reset()[0] for env in envs]
        else:
            obs = [s[2] for s in steps]
    return columns


def _idle(envs: list[Any], seed: int, rows: int, _: bool) -> list[list[Transition]]:
    """An ended env waits, storing nothing, until every env has ended; then all reset."""
    columns: list[list[Transition]] = [[] for _ in envs]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    waiting = [False] * len(envs)
    while min(len(c) for c in columns) < rows:
        for i, env in enumerate(envs):
            if waiting[i]:
                continue
            action = env.action_space.sample()
            next_obs, reward, terminated, truncated, _ = env.step(action)
            columns[i].append((obs[i], action, reward, terminated, truncated, next_obs))
            obs[i] = next_obs
            waiting[i] = terminated or truncated
        if all(waiting):
            obs = [env.reset()[0] for env in envs]
            waiting = [False] * len(envs)
    return [column[:rows] for column in columns]


_STEPPERS = {"restart": _restart, "continue": _continue, "none": _none, "idle": _idle}


def _leaves(space: spaces.Space[Any], value: Any, name: str, out: dict[str, np.ndarray]) -> None:
    """One array per leaf: Dict keys and Tuple positions join the name with ``/``."""
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            _leaves(sub, value[key], f"{name}/{key}", out)
    elif isinstance(space, spaces.Tuple):
        for j, sub in enumerate(space.spaces):
            _leaves(sub, value[j], f"{name}/{j}", out)
    elif isinstance(space, spaces.Discrete):
        out[name] = np.array([value], dtype=np.int64)
    else:
        out[name] = np.asarray(value, dtype=space.dtype).reshape(space.shape or (1,))


def _tensors(
    columns: list[list[Transition]],
    rows: int,
    observation_space: spaces.Space[Any],
    action_space: spaces.Space[Any],
) -> dict[str, np.ndarray]:
    cells: list[list[dict[str, np.ndarray]]] = []
    for t in range(rows):
        row = []
        for column in columns:
            obs, action, reward, terminated, truncated, next_obs = column[t]
            cell: dict[str, np.ndarray] = {
                "rewards": np.array([reward], dtype=np.float32),
                "terminated": np.array([terminated]),
                "truncated": np.array([truncated]),
            }
            _leaves(observation_space, obs, "observations", cell)
            _leaves(observation_space, next_obs, "next_observations", cell)
            _leaves(action_space, action, "actions", cell)
            row.append(cell)
        cells.append(row)
    names = cells[0][0].keys()
    return {n: np.stack([np.stack([cell[n] for cell in row]) for row in cells]) for n in names}
