"""The ``envpool`` engine: EnvPool's C++ implementation of an env (the ``envpool`` extra).

Its envs are stepped by ``envpool_stepper``; ``auto`` tries them only for the ids proven
to be ``gym.make``'s envs (``envpool_envs.GYM_EQUIVALENT_IDS``), without a seed, kwargs,
wrappers or ``--infos``.
"""

from __future__ import annotations

import importlib.util

from expcli.collect.engine_spec import AutoQuery, BuiltEnvs, EngineRequest
from expcli.envs.modes import AsyncMode
from expcli.errors import ConfigError

__all__ = [
    "ENVPOOL_WRAPPERS_REFUSED",
    "build_envpool",
    "check_envpool_engine_id",
    "envpool_async_refusal",
    "envpool_candidate",
    "envpool_skip",
]

ENVPOOL_WRAPPERS_REFUSED = "--mode envpool cannot apply --wrapper; use --mode dummy or subproc"


def build_envpool(request: EngineRequest) -> BuiltEnvs:
    """EnvPool's envs, their seeds (``seed + i``) fixed here.

    Raises:
        ConfigError: Wrappers asked, or EnvPool refuses the id or kwargs.
        EnvError: The envs could not be built.
        MissingDependencyError: EnvPool is not installed.
    """
    from expcli.envs.env_ids import bare_id
    from expcli.envs.envpool_envs import make_envpool_envs

    if request.wrappers:
        raise ConfigError(ENVPOOL_WRAPPERS_REFUSED)
    asynchronous = request.asynchronous
    envs = make_envpool_envs(
        bare_id(request.env_id),
        request.num_envs,
        seed=request.seed,
        asynchronous=None if asynchronous is AsyncMode.NONE else asynchronous.value,
        env_kwargs=request.env_kwargs,
    )
    return BuiltEnvs(envs)


def check_envpool_engine_id(env_id: str) -> str:
    """``env_id`` if EnvPool has it.

    Raises:
        ConfigError: EnvPool registers no such id (with the closest ids it has).
        MissingDependencyError: EnvPool is not installed.
    """
    from expcli.envs.envpool_envs import check_envpool_id

    return check_envpool_id(env_id)


def envpool_async_refusal(asynchronous: AsyncMode) -> str | None:
    """Why not ``asynchronous``: ``continue`` (EnvPool resets an ended env itself)."""
    from expcli.envs.envpool_envs import check_envpool_async

    try:
        check_envpool_async(asynchronous.value)
    except ConfigError as refused:
        return refused.message
    return None


def envpool_candidate(query: AutoQuery) -> bool:
    """Whether ``auto`` considers it: an id proven to be ``gym.make``'s env."""
    from expcli.envs.env_ids import bare_id
    from expcli.envs.envpool_envs import GYM_EQUIVALENT_IDS

    return bare_id(query.env_id) in GYM_EQUIVALENT_IDS


def envpool_skip(query: AutoQuery) -> str | None:
    """Why ``auto`` must not try EnvPool's env (proven to be ``gym.make``'s); None to try it."""
    if query.wrapped:
        return "--wrapper is given, and EnvPool's envs are not Gymnasium envs to wrap"
    if query.seed is not None:
        return "--seed is given, and EnvPool's envs draw from their own generators (other bytes)"
    if query.env_kwargs:
        return "--env-kwargs are given: its equivalence with gym.make's env is proven without"
    if query.infos:
        return "--infos is given, and EnvPool reports infos of its own"
    if importlib.util.find_spec("envpool") is None:
        return 'EnvPool is not installed (pip install "expcli[envpool]")'
    return None
