"""Building the envs of a collect run in the mode asked for, or the fastest one (``auto``).

``vector`` is Gymnasium's own batched implementation of an env, where one is registered
(``gym.make_vec(..., vectorization_mode="vector_entry_point")``, e.g. CartPole); the
other modes are ``ParallelEnv``'s. ``auto`` builds each candidate, steps it briefly with
random actions and keeps the fastest; every mode yields the same data for the same seed
except ``vector``, whose envs draw from their own generator.
"""

from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass
from typing import Any

from expcli.errors import ConfigError, EnvError

__all__ = [
    "Probe",
    "build_env",
    "choose_env",
    "has_vector_entry_point",
    "require_vector_entry_point",
]

_PROBE_SECONDS = 0.3


@dataclass(frozen=True, slots=True)
class Probe:
    """One candidate mode of ``auto`` and how fast it stepped."""

    mode: str
    steps_per_second: float


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

    try:
        return gym.spec(env_id.rpartition(":")[2]).vector_entry_point is not None
    except Exception:
        return False


def build_env(
    mode: str,
    env_id: str,
    num_envs: int,
    asynchronous: str | None,
    env_kwargs: dict[str, Any],
    *,
    num_cpus: int | None = None,
    ray_address: str | None = None,
    wrappers: tuple[str, ...] | list[str] = (),
) -> Any:
    """The envs of one mode: a ``ParallelEnv``, or a Gymnasium vector env for ``vector``.

    ``wrappers`` (``MODULE:CALLABLE`` specs) wrap each env right after ``gym.make``.

    Raises:
        ConfigError: Unknown env id, bad kwargs, or ``vector`` for an env without one or
            with wrappers.
        EnvError: The envs could not be built.
    """
    from expcli.envs import ParallelEnv
    from expcli.envs.parallel_env import check_env_id

    name = check_env_id(env_id)
    if mode != "vector":
        return ParallelEnv.from_id(
            env_id,
            num_envs,
            para_mode=mode,
            asynchronous=asynchronous,
            num_cpus=num_cpus,
            address=ray_address,
            wrappers=wrappers,
            **env_kwargs,
        )
    if wrappers:
        raise ConfigError("--mode vector cannot apply --wrapper; use --mode dummy or subproc")
    require_vector_entry_point(env_id)
    import gymnasium as gym

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return gym.make_vec(
                name, num_envs=num_envs, vectorization_mode="vector_entry_point", **env_kwargs
            )
    except TypeError as e:
        raise ConfigError(f"{env_id}: bad --env-kwargs for its vector env: {e}") from e
    except Exception as e:
        raise EnvError(f"could not build the vector env of {env_id}: {e}") from e


def candidate_modes(
    env_id: str, num_envs: int, asynchronous: str | None, wrapped: bool = False
) -> list[str]:
    """The modes ``auto`` tries, cheapest to start first (``vector`` only for unwrapped envs)."""
    modes = []
    if asynchronous == "restart" and not wrapped and has_vector_entry_point(env_id):
        modes.append("vector")
    modes.append("dummy")
    if num_envs >= 2 and (os.cpu_count() or 1) >= 2:
        modes.append("subproc")
    return modes


def choose_env(
    env_id: str,
    num_envs: int,
    asynchronous: str | None,
    env_kwargs: dict[str, Any],
    *,
    num_cpus: int | None = None,
    wrappers: tuple[str, ...] | list[str] = (),
) -> tuple[str, Any, list[Probe]]:
    """Build each candidate mode, step it for a moment, keep the fastest open.

    Returns:
        The chosen mode, its envs (not yet reset for the run) and every probe.
    """
    probes: list[Probe] = []
    best: tuple[float, str, Any] | None = None
    candidates = candidate_modes(env_id, num_envs, asynchronous, bool(wrappers))
    for mode in candidates:
        env = build_env(
            mode, env_id, num_envs, asynchronous, env_kwargs, num_cpus=num_cpus, wrappers=wrappers
        )
        try:
            speed = _probe(env) if len(candidates) > 1 else float("nan")
        except BaseException:
            env.close()
            raise
        probes.append(Probe(mode, speed))
        if best is None or speed > best[0]:
            if best is not None:
                best[2].close()
            best = (speed, mode, env)
        else:
            env.close()
    assert best is not None
    return best[1], best[2], probes


def _probe(env: Any) -> float:
    """Env steps per second with random actions, over a short burst after a warm-up."""
    from expcli.collect.policies import RandomPolicy
    from expcli.collect.steppers import make_stepper

    stepper = make_stepper(env)
    policy = RandomPolicy(stepper.action_space, stepper.num_envs, 0)
    stepper.reset(None)
    for _ in range(5):
        stepper.step(policy())
    steps = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < _PROBE_SECONDS:
        for _ in range(10):
            stepper.step(policy())
        steps += 10 * stepper.num_envs
    return steps / elapsed
