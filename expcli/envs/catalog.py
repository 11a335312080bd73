"""The catalog of registered Gymnasium environments, with their spaces, for ``expcli envs``.

Spaces are only known once an env is made, so ``list_envs`` makes each env that matches
the filter (and only those), reads its spaces and closes it. An env whose extra is not
installed (Box2D, MuJoCo, Atari, JAX, ...) is listed with what it needs and how to install
it; any other failure is listed with its message. One env never aborts the listing, and
Gymnasium's warnings (and anything an env prints) are kept out of the results.
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["EnvEntry", "describe_space", "list_envs"]

# What an env may need (a module name, or a word of the error), and how to install it; the
# first that matches wins, so "gymnasium-robotics" beats the "mujoco" in its message.
_EXTRAS: dict[str, tuple[str, str]] = {
    "gymnasium-robotics": ("gymnasium-robotics", "pip install gymnasium-robotics"),
    "box2d": ("box2d", 'pip install swig && pip install "gymnasium[box2d]"'),
    "mujoco": ("mujoco", 'pip install "gymnasium[mujoco]"'),
    "mujoco_py": ("mujoco-py", "pip install gymnasium-robotics mujoco-py"),
    "ale_py": ("atari", 'pip install "gymnasium[atari]"'),
    "jax": ("jax", 'pip install "gymnasium[jax]"'),
    "flax": ("jax", 'pip install "gymnasium[jax]"'),
    "pygame": ("pygame", 'pip install "gymnasium[classic-control]"'),
    "shimmy": ("shimmy", 'pip install "shimmy[gym-v26]"'),
}
_PIP_IN_MESSAGE = re.compile(r"`(pip install [^`]+)`")


@dataclass(frozen=True, slots=True)
class EnvEntry:
    """One registered env.

    Attributes:
        id: The id to pass to ``gym.make`` (and ``expcli collect``).
        entry_point: Where the env class lives.
        max_episode_steps: The registered time limit (None: no limit).
        vector: Whether Gymnasium registers a batched implementation (``--mode vector``).
        observation_space: Compact description (None when not made, or it failed).
        action_space: Compact description.
        needs: The missing extra, when making the env failed for want of one.
        install: The command that installs it.
        error: Why making the env failed, for any other reason.
    """

    id: str
    entry_point: str
    max_episode_steps: int | None
    vector: bool
    observation_space: str | None = None
    action_space: str | None = None
    needs: str | None = None
    install: str | None = None
    error: str | None = None

    @property
    def status(self) -> str:
        """``ok``, ``needs <what> (<install>)``, ``error: ...`` or ``""`` (spaces not asked)."""
        if self.needs is not None:
            return f"needs {self.needs} ({self.install})" if self.install else f"needs {self.needs}"
        if self.error is not None:
            return f"error: {self.error}"
        return "ok" if self.observation_space is not None else ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the fields, and ``status``)."""
        return {**asdict(self), "status": self.status}


def list_envs(
    pattern: str | None = None, *, spaces: bool = True, modules: Iterable[str] = ()
) -> list[EnvEntry]:
    """Registered Gymnasium envs whose id contains ``pattern`` (case-insensitive), sorted.

    Args:
        pattern: Substring of the id to keep; None or empty keeps every env.
        spaces: Make each kept env to read its spaces (closed at once); False lists ids,
            entry points and time limits only, making nothing.
        modules: Modules to import first, for packages that register envs when imported
            (``ale_py``, ``gymnasium_robotics``, ...).

    Raises:
        ConfigError: A module in ``modules`` cannot be imported.
    """
    import gymnasium as gym

    for name in modules:
        _import_registering(name)
    needle = (pattern or "").lower()
    entries = []
    for env_id in sorted(gym.envs.registry, key=str.lower):
        if needle in env_id.lower():
            spec = gym.envs.registry[env_id]
            entry = EnvEntry(
                id=env_id,
                entry_point=_entry_point(spec.entry_point),
                max_episode_steps=spec.max_episode_steps,
                vector=spec.vector_entry_point is not None,
            )
            entries.append(_with_spaces(entry) if spaces else entry)
    return entries


def _import_registering(name: str) -> None:
    from expcli.envs.env_ids import import_registering

    missing = _EXTRAS.get(name.split(".")[0])
    import_registering(name, hint=f" ({missing[1]})" if missing else "")


def _entry_point(entry_point: Any) -> str:
    if isinstance(entry_point, str):
        return entry_point
    return f"{getattr(entry_point, '__module__', '?')}:{getattr(entry_point, '__qualname__', '?')}"


def _with_spaces(entry: EnvEntry) -> EnvEntry:
    """The entry with the env's spaces, or with why it could not be made. Never raises."""
    import dataclasses

    import gymnasium as gym

    env = None
    try:
        # Gymnasium warns through `warnings` and some envs print: neither may reach the
        # results on stdout, nor fail a run with warnings turned into errors.
        with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
            warnings.simplefilter("ignore")
            env = gym.make(entry.id, disable_env_checker=True)
            return dataclasses.replace(
                entry,
                observation_space=describe_space(env.observation_space),
                action_space=describe_space(env.action_space),
            )
    except Exception as e:
        needs, install, error = _failure(e)
        return dataclasses.replace(entry, needs=needs, install=install, error=error)
    finally:
        if env is not None:
            with contextlib.suppress(Exception), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                env.close()


def _failure(error: Exception) -> tuple[str | None, str | None, str | None]:
    """``(needs, install, None)`` when a dependency is missing, else ``(None, None, error)``."""
    message = " ".join(str(error).split()) or type(error).__name__
    if not _is_dependency_error(error):
        return None, None, f"{type(error).__name__}: {message}"
    module = getattr(error, "name", None) or ""
    key = module.split(".")[0].lower()
    if key not in _EXTRAS:
        lowered = message.lower()
        key = next((k for k in _EXTRAS if re.search(rf"\b{re.escape(k)}\b", lowered)), "")
    if key:
        needs, install = _EXTRAS[key]
        return needs, install, None
    if module:
        return module, f"pip install {module.split('.')[0]}", None
    commands = _PIP_IN_MESSAGE.findall(message)
    if commands:
        return commands[-1].removeprefix("pip install ").strip('"'), commands[-1], None
    return None, None, f"{type(error).__name__}: {message}"


def _is_dependency_error(error: Exception) -> bool:
    return isinstance(error, ImportError) or type(error).__name__ == "DependencyNotInstalled"


def describe_space(space: Any) -> str:
    """A one-line description: Gymnasium's repr, shortened for Boxes of mixed bounds.

    ``Box(-2.0, 2.0, (1,), float32)`` when the bounds are uniform, ``Box((4,), float32)``
    when they differ per element; Dict and Tuple describe their parts the same way.
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        low, high = np.unique(space.low), np.unique(space.high)
        if low.size == 1 and high.size == 1:
            return f"Box({low[0]}, {high[0]}, {space.shape}, {space.dtype})"
        return f"Box({space.shape}, {space.dtype})"
    if isinstance(space, spaces.Dict):
        inner = ", ".join(f"{k!r}: {describe_space(s)}" for k, s in space.spaces.items())
        return f"Dict({inner})"
    if isinstance(space, spaces.Tuple):
        return f"Tuple({', '.join(describe_space(s) for s in space.spaces)})"
    return repr(space)
