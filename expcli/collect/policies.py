"""Policies for ``expcli collect``: random, a Python callable, or a TorchScript/export file.

A policy maps a batch of observations (``(num_envs, *obs_shape)``, or a dict (tuple) of
``(num_envs, *leaf_shape)`` arrays for Dict (Tuple) spaces, as gymnasium batches them) to a
numpy batch of actions ``(num_envs, *action_shape)`` with the action space's dtype (a dict
or tuple of such arrays for Dict and Tuple action spaces), and carries a ``description``
for the dataset metadata.

Specs accepted by ``make_policy``:

* ``random``: the action space's own sampler, one stream per env derived from the seed
  and the env's index (``random_policy``), so that the actions do not depend on how the
  envs are split between processes or machines.
* ``MODULE:CALLABLE`` or ``path/to/file.py:CALLABLE``: a callable of one batch of
  observations. Classes and factories are not instantiated: name the policy itself.
* ``FILE.pt`` / ``FILE.pt2``: a TorchScript file or a ``torch.export`` archive, run under
  ``torch.no_grad()`` on a float32 batch. For a Discrete(n) space, an ``(N, n)`` float
  output is taken as logits and its argmax is the action.

``check_actions`` validates a batch against the space (the Collector runs it on the first
step) and raises ``ConfigError`` saying what was expected and what came.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from expcli.collect.action_checks import ARRAY_SPACES, check_actions
from expcli.collect.policy_files import load_torch_policy
from expcli.collect.random_policy import RandomPolicy
from expcli.errors import ConfigError, quoted
from expcli.named_callables import load_named

__all__ = ["CallablePolicy", "Policy", "RandomPolicy", "check_actions", "make_policy"]

TORCH_SUFFIXES = (".pt", ".pt2")


class Policy(Protocol):
    """``policy(observations) -> actions`` on batches, with a description for the metadata."""

    description: dict[str, Any]

    def __call__(self, observations: Any) -> Any:
        """A batch of actions ``(num_envs, *action_shape)`` for a batch of observations.

        A dict or tuple of such arrays for Dict and Tuple spaces.
        """
        ...


def make_policy(
    spec: str, observation_space: Any, action_space: Any, num_envs: int, seed: int | None
) -> Policy:
    """The policy named by ``spec`` for ``num_envs`` envs with these spaces.

    Args:
        spec: ``random``, ``MODULE:CALLABLE``, ``path/to/file.py:CALLABLE`` or a
            TorchScript/``torch.export`` file (``.pt``, ``.pt2``).
        observation_space: One env's observation space.
        action_space: One env's action space.
        num_envs: Rows of every batch.
        seed: Seed of the random policy (recorded for the others).

    Raises:
        ConfigError: An unknown spec, a missing module, file or attribute, or an attribute
            that is not a callable of one batch.
        FormatError: A ``.pt``/``.pt2`` file that is neither TorchScript nor a safe
            ``torch.export`` archive.
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ConfigError(f"num_envs must be a positive integer, got {num_envs!r}")
    text = spec.strip() if isinstance(spec, str) else ""
    if text == "random":
        return RandomPolicy(action_space, num_envs, seed)
    if text.lower().endswith(TORCH_SUFFIXES):
        fn, description = load_torch_policy(text, action_space, num_envs)
    elif ":" in text:
        fn, description = _load_callable(text)
    else:
        raise ConfigError(
            f"unknown policy {quoted(spec)}; expected 'random', MODULE:CALLABLE, "
            "path/to/file.py:CALLABLE, or a TorchScript / torch.export file (.pt, .pt2)"
        )
    return CallablePolicy(fn, description, action_space, num_envs)


class CallablePolicy:
    """A callable of a batch, its output made a numpy batch of the space's shape and dtype."""

    def __init__(
        self, fn: Callable[[Any], Any], description: dict[str, Any], space: Any, num_envs: int
    ) -> None:
        self.fn = fn
        self.description = description
        self.action_space = space
        self.num_envs = num_envs
        composite = type(space).__name__ not in ARRAY_SPACES
        self._shape = None if composite else (num_envs, *space.shape)
        self._dtype = None if composite else np.dtype(space.dtype)

    def __call__(self, observations: Any) -> Any:
        """The callable's actions; a batch that does not match exactly is checked and cast."""
        spec = self.description["spec"]
        try:
            out = self.fn(observations)
        except ConfigError:
            raise
        except Exception as e:
            raise ConfigError(
                f"policy {spec!r} failed on a batch of observations "
                f"({_describe_batch(observations)}): {type(e).__name__}: {e} "
                "(EXPCLI_DEBUG=1 shows the traceback)"
            ) from e
        if type(out) is np.ndarray and out.shape == self._shape and out.dtype == self._dtype:
            return out
        return check_actions(out, self.action_space, self.num_envs, spec)


def _load_callable(spec: str) -> tuple[Callable[[Any], Any], dict[str, Any]]:
    """Import ``MODULE:NAME`` or ``file.py:NAME`` and check it is a callable of one batch."""
    obj, description = load_named(spec, "policy")
    _check_batch_callable(obj, spec)
    return obj, {"kind": "callable", **description}


def _check_batch_callable(obj: Any, spec: str) -> None:
    """Refuse what cannot be called with one batch: classes, factories of several arguments."""
    if inspect.isclass(obj):
        raise ConfigError(
            f"policy {spec!r} is a class; expected a callable of a batch of observations "
            "(make the instance in your module, e.g. `policy = MyPolicy(...)`, and name it)"
        )
    if not callable(obj):
        raise ConfigError(f"policy {spec!r} is a {type(obj).__name__}, not a callable")
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):  # builtins and C callables: nothing to check
        return
    kinds = inspect.Parameter
    positional = [
        p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
    ]
    varargs = any(p.kind is kinds.VAR_POSITIONAL for p in params)
    required = [p.name for p in positional if p.default is p.empty]
    if len(required) > 1 or (not positional and not varargs):
        raise ConfigError(
            f"policy {spec!r} takes ({', '.join(p.name for p in positional)}); a policy is "
            "called with one batch of observations (if it is a factory, call it in your "
            "module and name the policy it returns)"
        )


def _describe_batch(batch: Any) -> str:
    if isinstance(batch, np.ndarray):
        return f"shape {batch.shape}, {batch.dtype}"
    if isinstance(batch, dict):
        return "dict of " + ", ".join(f"{k}: {_describe_batch(v)}" for k, v in batch.items())
    if isinstance(batch, tuple):
        return "tuple of " + ", ".join(_describe_batch(v) for v in batch)
    return type(batch).__name__
