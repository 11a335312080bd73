"""Does a batch of actions fit the action space? Said plainly when it does not.

The Collector checks the policy's first batch here, before stepping any env, so a policy
whose output has the wrong shape, dtype or range fails at once with a message naming the
policy, the space, what was expected and what came, instead of deep inside an env.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from expcli.errors import ConfigError

__all__ = ["ARRAY_SPACES", "check_actions", "to_numpy"]

ARRAY_SPACES = ("Box", "Discrete", "MultiDiscrete", "MultiBinary")


def check_actions(actions: Any, action_space: Any, num_envs: int, policy_spec: str) -> Any:
    """``actions`` as a ``(num_envs, *action_space.shape)`` array of the space's dtype.

    Compatible dtypes are cast (int32 to Discrete's int64, float64 to a float32 Box, bool
    to MultiBinary's int8), without a copy when none is needed; a trailing axis of size 1
    is added or dropped (``(N, 1)`` for Discrete). Discrete, MultiDiscrete and MultiBinary
    values must be integers in range; Box values must be numbers within the bounds (out of
    bounds is refused, not clipped). Dict and Tuple spaces take gymnasium's batch (a dict
    or tuple of ``(num_envs, *leaf_shape)`` arrays, each leaf checked as above) or one
    sample per env, and come back as gymnasium's batch.

    Raises:
        ConfigError: The batch does not fit; the message says what was expected and got.
    """
    return _check(actions, action_space, num_envs, f"policy {policy_spec!r}")


def _check(actions: Any, action_space: Any, num_envs: int, who: str) -> Any:
    kind = type(action_space).__name__
    if kind in ("Dict", "Tuple"):
        return _check_composite(actions, action_space, num_envs, who)
    if kind not in ARRAY_SPACES:
        return _check_per_env(actions, action_space, num_envs, who)
    array = to_numpy(actions, who)
    expected = (num_envs, *action_space.shape)
    if array.shape != expected:
        if array.shape[:1] != (num_envs,) or _squeeze(array.shape[1:]) != _squeeze(expected[1:]):
            raise ConfigError(
                f"{who} returned actions of shape {array.shape}; expected {expected} "
                f"(one action per env for {num_envs} envs, {action_space})"
            )
        array = array.reshape(expected)
    dtype = np.dtype(action_space.dtype)
    if dtype.kind in "iu":
        return _check_integers(array, action_space, dtype, who)
    if array.dtype.kind not in "biuf":
        raise ConfigError(f"{who} returned {array.dtype} actions; {action_space} takes numbers")
    array = array.astype(dtype, copy=False)
    if np.isnan(array).any():
        env = int(np.argwhere(np.isnan(array))[0][0])
        raise ConfigError(f"{who} returned NaN for env {env}; {action_space} takes numbers")
    low = np.broadcast_to(action_space.low, expected)
    high = np.broadcast_to(action_space.high, expected)
    outside = (array < low) | (array > high)
    if outside.any():
        at = tuple(int(i) for i in np.argwhere(outside)[0])
        raise ConfigError(
            f"{who} returned {array[at].item()!r} for env {at[0]} (element {at[1:]}), outside "
            f"[{low[at]}, {high[at]}] of {action_space}; out-of-bounds Box actions are "
            "refused, not clipped (clip them in the policy)"
        )
    return array


def _check_integers(array: np.ndarray, space: Any, dtype: np.dtype[Any], who: str) -> np.ndarray:
    """Integers (or bools) within the space's range, then cast: never wrap around."""
    if array.dtype.kind not in "biu":
        hint = " (take an argmax of logits, or cast to int)" if array.dtype.kind == "f" else ""
        raise ConfigError(
            f"{who} returned {array.dtype} actions; {space} takes integers ({dtype}){hint}"
        )
    kind = type(space).__name__
    if kind == "Discrete":
        low: Any = int(space.start)
        high: Any = int(space.start + space.n - 1)
    elif kind == "MultiDiscrete":
        low, high = space.start, space.start + space.nvec - 1
    elif kind == "MultiBinary":
        low, high = 0, 1
    else:  # an integer Box
        low, high = space.low, space.high
    outside = (array < low) | (array > high)
    if outside.any():
        at = tuple(int(i) for i in np.argwhere(outside)[0])
        lo = np.broadcast_to(low, array.shape)[at]
        hi = np.broadcast_to(high, array.shape)[at]
        element = f" (element {at[1:]})" if len(at) > 1 else ""
        raise ConfigError(
            f"{who} returned action {array[at].item()!r} for env {at[0]}{element}, outside "
            f"{space}: expected integers in [{lo}, {hi}]"
        )
    return array.astype(dtype, copy=False)


def _check_composite(actions: Any, space: Any, num_envs: int, who: str) -> Any:
    """Gymnasium's batch of a Dict (dict) or Tuple (tuple) space, every leaf checked.

    A sequence of one sample per env is checked sample by sample, then batched.
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Dict) and isinstance(actions, Mapping):
        expected = list(space.spaces)
        if set(actions) != set(expected):
            raise ConfigError(
                f"{who} returned a dict with keys {sorted(map(str, actions))}; expected "
                f"{sorted(expected)} for {space}"
            )
        return {
            key: _check(actions[key], sub, num_envs, _leaf_who(who, key))
            for key, sub in space.spaces.items()
        }
    if isinstance(space, spaces.Tuple) and isinstance(actions, tuple):
        if len(actions) != len(space.spaces):
            raise ConfigError(
                f"{who} returned a tuple of {len(actions)} batches; expected "
                f"{len(space.spaces)} for {space}"
            )
        return tuple(
            _check(part, sub, num_envs, _leaf_who(who, i))
            for i, (part, sub) in enumerate(zip(actions, space.spaces, strict=True))
        )
    if isinstance(actions, (Mapping, tuple)):
        raise ConfigError(
            f"{who} returned a {type(actions).__name__}; {space} takes a "
            f"{'dict' if isinstance(space, spaces.Dict) else 'tuple'} of batches"
        )
    from gymnasium.vector.utils import concatenate, create_empty_array

    items = _check_per_env(actions, space, num_envs, who)
    out: Any = create_empty_array(space, num_envs)
    return concatenate(space, list(items), out)


def _leaf_who(who: str, key: str | int) -> str:
    """``policy 'p' (actions/key)``, or one key further down for a nested leaf."""
    if who.endswith(")") and "(actions/" in who:
        return f"{who[:-1]}/{key})"
    return f"{who} (actions/{key})"


def _check_per_env(actions: Any, space: Any, num_envs: int, who: str) -> np.ndarray:
    """One sample per env (a sequence), each in ``space``: an object array of them."""
    items = actions
    try:
        count = len(items)
    except TypeError:
        raise ConfigError(
            f"{who} returned {type(actions).__name__}; expected {num_envs} actions of {space}"
        ) from None
    if count != num_envs:
        raise ConfigError(f"{who} returned {count} actions; expected {num_envs}, one per env")
    out = np.empty(num_envs, dtype=object)
    for i, item in enumerate(items):
        if not space.contains(item):
            raise ConfigError(f"{who} returned {item!r} for env {i}, not in {space}")
        out[i] = item
    return out


def to_numpy(value: Any, who: str) -> np.ndarray:
    """A policy's output as a numeric numpy array (torch tensors detached to the CPU)."""
    if isinstance(value, np.ndarray):
        array = value
    else:
        torch = sys.modules.get("torch")  # never import torch just to ask
        if torch is not None and isinstance(value, torch.Tensor):
            return value.detach().cpu().numpy()  # type: ignore[no-any-return]
        if callable(value):
            raise ConfigError(
                f"{who} returned a {type(value).__name__}, not actions (if it is a factory, "
                "call it in your module and name the policy it returns)"
            )
        try:
            array = np.asarray(value)
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{who} returned {type(value).__name__}, not an array: {e}") from e
    if array.dtype.kind not in "biuf":
        raise ConfigError(
            f"{who} returned {type(value).__name__} of {array.dtype}; expected numeric actions"
        )
    return array


def _squeeze(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)
