"""The ``vector`` engine: Gymnasium's own batched implementation of an env, where one is registered.

``gym.make_vec(..., vectorization_mode="vector_entry_point")`` (e.g. CartPole). Another
implementation, with its own generator: refused where its spec or spaces differ from the
env ``gym.make`` builds (``vector_checks``), unless ``--force-mode``.
"""

from __future__ import annotations

import warnings
from typing import Any

from expcli.collect.engine_spec import AutoQuery, BuiltEnvs, EngineRequest, differ
from expcli.collect.vector_checks import space_differences, spec_differences
from expcli.envs.modes import AsyncMode
from expcli.errors import ConfigError, EnvError

__all__ = [
    "VECTOR_WRAPPERS_REFUSED",
    "build_vector",
    "vector_async_refusal",
    "check_vector_id",
    "has_vector_entry_point",
    "require_vector_entry_point",
    "vector_candidate",
    "vector_skip",
]

VECTOR_WRAPPERS_REFUSED = (
    "--mode vector builds Gymnasium's batched env, which --wrapper cannot wrap; "
    "use --mode dummy or subproc"
)


def require_vector_entry_point(env_id: str) -> None:
    """Raise ``ConfigError`` unless Gymnasium registers a batched ``env_id``."""
    if not has_vector_entry_point(env_id):
        raise ConfigError(
            f"{env_id} has no batched (vector) implementation registered in Gymnasium; "
            "use --mode dummy or subproc"
        )


def has_vector_entry_point(env_id: str) -> bool:
    """Whether Gymnasium registers a batched implementation of ``env_id``."""
    import gymnasium as gym

    from expcli.envs.env_ids import check_env_id

    try:
        return gym.spec(check_env_id(env_id)).vector_entry_point is not None
    except Exception:
        return False


def check_vector_id(env_id: str) -> None:
    """A registered env id with a batched implementation, else ``ConfigError``."""
    from expcli.envs.env_ids import check_env_id

    check_env_id(env_id)
    require_vector_entry_point(env_id)


def vector_async_refusal(asynchronous: AsyncMode) -> str | None:
    """Why not ``asynchronous``: it runs ``restart`` only (Gymnasium's autoreset)."""
    if asynchronous is AsyncMode.RESTART:
        return None
    return (
        "--mode vector always resets an ended env (Gymnasium's autoreset); it takes "
        "--async restart only"
    )


def build_vector(request: EngineRequest) -> BuiltEnvs:
    """``--mode vector``: its envs, refused where they are not the env ``gym.make`` builds.

    Returns:
        The vector env and what differs from ``gym.make``'s env (empty unless
        ``request.force``).

    Raises:
        ConfigError: It differs and ``force`` is not set (the message says how), or it
            cannot take the env kwargs, or it has no batched implementation.
        EnvError: It could not be built.
    """
    env_id, env_kwargs = request.env_id, request.env_kwargs
    differences = spec_differences(env_id, env_kwargs)
    if differences and not request.force:
        raise _refusal(env_id, differences)
    env = _make_vector(request)
    if not differences:
        differences = space_differences(env, env_id, env_kwargs)
        if differences and not request.force:
            env.close()
            raise _refusal(env_id, differences)
    return BuiltEnvs(env, differences)


def _make_vector(request: EngineRequest) -> Any:
    from expcli.envs.env_ids import check_env_id

    env_id = request.env_id
    name = check_env_id(env_id)
    if request.wrappers:
        raise ConfigError("--mode vector cannot apply --wrapper; use --mode dummy or subproc")
    require_vector_entry_point(env_id)
    import gymnasium as gym

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return gym.make_vec(
                name,
                num_envs=request.num_envs,
                vectorization_mode="vector_entry_point",
                **request.env_kwargs,
            )
    except TypeError as e:
        raise ConfigError(f"{env_id}: bad --env-kwargs for its vector env: {e}") from e
    except Exception as e:
        raise EnvError(f"could not build the vector env of {env_id}: {e}") from e


def vector_candidate(query: AutoQuery) -> bool:
    """Whether ``auto`` considers it: Gymnasium registers a batched ``env_id``."""
    return has_vector_entry_point(query.env_id)


def vector_skip(query: AutoQuery) -> str | None:
    """Why ``auto`` must not try ``vector``, as far as the spec tells; None to try it."""
    if query.wrapped:
        return "--wrapper is given, and Gymnasium's batched env cannot be wrapped per env"
    if query.seed is not None:
        return "--seed is given, and its envs draw from their own generator (other bytes)"
    differences = spec_differences(query.env_id, query.env_kwargs)
    return differ(differences) if differences else None


def _refusal(env_id: str, differences: list[str]) -> ConfigError:
    return ConfigError(
        f"--mode vector: the spec of {env_id}'s vector env differs from the env gym.make builds: "
        f"{'; '.join(differences)}; choose another --mode, or --force-mode to collect it "
        "anyway (the metadata records that)"
    )
