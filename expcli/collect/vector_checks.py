"""Whether Gymnasium's batched (``vector``) implementation of an env is the env ``gym.make`` builds.

A vector entry point is a separate implementation, free to differ: ale_py's
``AtariVectorEnv`` stores (4, 84, 84) grayscale stacks, clips rewards and presses no-ops
at reset, where ``gym.make("ALE/Pong-v5")`` gives (210, 160, 3) RGB frames. So expcli
takes it for the same env only when nothing shows a difference:

* before building (``spec_differences``): the vector constructor names every keyword
  ``gym.make``'s env receives (the spec's kwargs, ``--env-kwargs``, and the time limit
  ``max_episode_steps``), it has no settings of its own beyond batching, and the settings
  both constructors have share their defaults;
* once built (``space_differences``): its single-env spaces equal ``gym.make``'s.

Anything that cannot be inspected counts as a difference: ``auto`` then simply does not
try ``vector``.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["space_differences", "spec_differences"]

# Parameters of a vector constructor that say how to batch, not what the env is.
_BATCHING = frozenset(
    {"num_envs", "batch_size", "num_threads", "thread_affinity_offset", "autoreset_mode"}
)


def spec_differences(env_id: str, env_kwargs: Mapping[str, Any]) -> list[str]:
    """What the registered spec shows to differ between the vector env and ``gym.make``'s.

    Returns:
        One short phrase per difference; empty when none is seen.
    """
    import gymnasium as gym

    from expcli.envs.env_ids import check_env_id

    spec = gym.spec(check_env_id(env_id))  # imports the module of "module:EnvId"
    if spec.vector_entry_point is None:
        return ["no vector implementation is registered"]
    differences = []
    if spec.additional_wrappers:
        names = ", ".join(w.name for w in spec.additional_wrappers)
        differences.append(f"gym.make adds wrappers it lacks ({names})")
    try:
        vector, vector_open = _parameters(spec.vector_entry_point)
        single, _ = _parameters(spec.entry_point)
    except Exception as e:
        return [*differences, f"its constructor cannot be inspected ({e})"]
    given = {**spec.kwargs, **env_kwargs}
    if spec.max_episode_steps is not None:
        given.setdefault("max_episode_steps", spec.max_episode_steps)
    for key, value in given.items():
        if key in vector:
            continue
        if key == "max_episode_steps":
            differences.append(f"it applies no time limit (max_episode_steps={value})")
        else:
            source = "--env-kwargs" if key in env_kwargs else "the spec"
            how = "may ignore" if vector_open else "takes no"
            differences.append(f"it {how} {key}={value!r} (from {source})")
    own = []
    for key, default in vector.items():
        if key in given or key in _BATCHING or default is inspect.Parameter.empty:
            continue
        if key not in single:
            own.append(f"{key}={default!r}")
        elif not _same(default, single[key]):
            differences.append(f"{key}={default!r} where gym.make's env has {single[key]!r}")
    if own:
        differences.append(f"settings gym.make's env lacks: {', '.join(own)}")
    return differences


def space_differences(vector_env: Any, env_id: str, env_kwargs: Mapping[str, Any]) -> list[str]:
    """Where the built vector env's single-env spaces differ from ``gym.make``'s.

    Returns:
        One short phrase per space that differs; empty when both are equal.
    """
    import gymnasium as gym

    from expcli.envs.env_ids import bare_id

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            reference = gym.make(bare_id(env_id), **env_kwargs)
        except Exception as e:
            return [f"gym.make failed to compare with ({type(e).__name__}: {e})"]
    try:
        differences = []
        for label, mine, theirs in (
            ("observation", vector_env.single_observation_space, reference.observation_space),
            ("action", vector_env.single_action_space, reference.action_space),
        ):
            if not _same_space(mine, theirs):
                ours, make = _short(mine), _short(theirs)
                if ours == make:
                    ours, make = f"{ours} with other bounds or values", make
                differences.append(f"{label} space {ours} where gym.make's is {make}")
        return differences
    finally:
        reference.close()


def _parameters(entry_point: Any) -> tuple[dict[str, Any], bool]:
    """Keyword parameters of a constructor (name to default) and whether it takes ``**kw``."""
    from gymnasium.envs.registration import load_env_creator

    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    target = creator.__init__ if inspect.isclass(creator) else creator
    parameters = inspect.signature(target).parameters
    named = {
        name: p.default
        for name, p in parameters.items()
        if name != "self"
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    var = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    return named, var


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(type(a) is type(b) and a == b)
    except Exception:
        return False


def _same_space(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and getattr(a, "dtype", None) == getattr(b, "dtype", None)
    except Exception:
        return False


def _short(space: Any) -> str:
    shape = getattr(space, "shape", None)
    dtype = getattr(space, "dtype", None)
    return f"{type(space).__name__}{tuple(shape) if shape is not None else ''} {dtype}".strip()
