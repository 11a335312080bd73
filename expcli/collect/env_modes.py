"""Building the envs of a collect run in the mode asked for, or choosing the fastest (``auto``).

``vector`` is Gymnasium's own batched implementation of an env, where one is registered
(``gym.make_vec(..., vectorization_mode="vector_entry_point")``, e.g. CartPole);
``envpool`` is EnvPool's C++ implementation (the ``envpool`` extra); the other modes are
``ParallelEnv``'s. ``auto`` builds each candidate, steps it briefly with random actions,
closes it, and names the fastest. It never changes the data: every ``ParallelEnv`` mode
gives the same bytes for the same seed, and ``vector`` and ``envpool`` (other
implementations, with their own generators) are candidates only without a seed and where
they are the env ``gym.make`` builds (``vector_checks``; ``envpool_envs.gym_equivalent``).
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
import warnings
from dataclasses import dataclass
from typing import Any

from expcli.collect.vector_checks import space_differences, spec_differences
from expcli.errors import ConfigError, EnvError

__all__ = [
    "Probe",
    "build_checked_vector",
    "build_env",
    "choose_mode",
    "has_vector_entry_point",
    "require_vector_entry_point",
]

_PROBE_SECONDS = 0.3


@dataclass(frozen=True, slots=True)
class Probe:
    """One candidate mode of ``auto``: how fast it stepped (NaN: not stepped), or why not."""

    mode: str
    steps_per_second: float
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The probe for the metadata (no NaN: JSON has none)."""
        speed = None if math.isnan(self.steps_per_second) else round(self.steps_per_second)
        return {"mode": self.mode, "steps_per_second": speed, "skipped": self.skipped}


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


def build_env(
    mode: str,
    env_id: str,
    num_envs: int,
    asynchronous: str | None,
    env_kwargs: dict[str, Any],
    *,
    num_cpus: int | None = None,
    ray_address: str | None = None,
    step_timeout: float | None = None,
    wrappers: tuple[str, ...] | list[str] = (),
    seed: int | None = None,
) -> Any:
    """The envs of one mode.

    A ``ParallelEnv``, a Gymnasium vector env for ``vector``, or ``EnvPoolEnvs`` for ``envpool``
    (whose seeds, ``seed + i``, are fixed here).

    ``step_timeout`` applies to the ``ParallelEnv`` modes (Gymnasium's vector envs have none).
    ``wrappers`` (``MODULE:CALLABLE`` specs) wrap each env right after ``gym.make``.

    Raises:
        ConfigError: Unknown env id, bad kwargs, or ``vector`` for an env without one.
        EnvError: The envs could not be built.
        MissingDependencyError: ``envpool`` without the extra.
    """
    from expcli.envs import ParallelEnv
    from expcli.envs.env_ids import bare_id, check_env_id

    if mode == "envpool":
        from expcli.envs.envpool_envs import make_envpool_envs

        if wrappers:
            raise ConfigError("--mode envpool cannot apply --wrapper; use --mode dummy or subproc")

        return make_envpool_envs(
            bare_id(env_id),
            num_envs,
            seed=seed,
            asynchronous=asynchronous,
            env_kwargs=env_kwargs,
        )
    name = check_env_id(env_id)
    if mode != "vector":
        return ParallelEnv.from_id(
            env_id,
            num_envs,
            para_mode=mode,
            asynchronous=asynchronous,
            num_cpus=num_cpus,
            address=ray_address,
            step_timeout=step_timeout,
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


def candidate_modes(env_id: str, num_envs: int, asynchronous: str | None) -> list[str]:
    """The modes ``auto`` considers, cheapest to start first."""
    from expcli.envs.env_ids import bare_id
    from expcli.envs.envpool_envs import GYM_EQUIVALENT_IDS

    modes = []
    if asynchronous == "restart" and has_vector_entry_point(env_id):
        modes.append("vector")
    modes.append("dummy")
    if num_envs >= 2 and (os.cpu_count() or 1) >= 2:
        modes.append("subproc")
    if bare_id(env_id) in GYM_EQUIVALENT_IDS and asynchronous != "continue":
        modes.append("envpool")
    return modes


def build_checked_vector(
    env_id: str, num_envs: int, env_kwargs: dict[str, Any], *, force: bool
) -> tuple[Any, list[str]]:
    """``--mode vector``: its envs, refused where they are not the env ``gym.make`` builds.

    Returns:
        The vector env and what differs from ``gym.make``'s env (empty unless ``force``).

    Raises:
        ConfigError: It differs and ``force`` is not set (the message says how), or it
            cannot take ``env_kwargs``.
        EnvError: It could not be built.
    """
    differences = spec_differences(env_id, env_kwargs)
    if differences and not force:
        raise _refusal(env_id, differences)
    env = build_env("vector", env_id, num_envs, "restart", env_kwargs)
    if not differences:
        differences = space_differences(env, env_id, env_kwargs)
        if differences and not force:
            env.close()
            raise _refusal(env_id, differences)
    return env, differences


def choose_mode(
    env_id: str,
    num_envs: int,
    asynchronous: str | None,
    env_kwargs: dict[str, Any],
    *,
    seed: int | None = None,
    num_cpus: int | None = None,
    step_timeout: float | None = None,
    wrappers: tuple[str, ...] | list[str] = (),
    infos: bool = False,
) -> tuple[str, list[Probe]]:
    """The fastest mode that stores the data every mode stores, and what was tried.

    ``vector`` is considered only when no ``seed`` is given (its envs draw from their own
    generator) and it is the env ``gym.make`` builds (``vector_checks``); a vector env
    that cannot take ``env_kwargs`` is skipped too. ``envpool`` likewise: only without a
    seed, without ``env_kwargs``, for the ids proven to be ``gym.make``'s envs, and
    without ``infos`` (EnvPool reports infos of its own). Each candidate is built,
    stepped for a moment and closed: the caller builds the chosen mode afresh, because
    some envs' ``reset(seed)`` is not a full reset, and probed envs would change the data.

    Returns:
        The chosen mode and one ``Probe`` per candidate (skipped ones with their reason).
    """
    skipped: list[Probe] = []
    runnable: list[str] = []
    for mode in candidate_modes(env_id, num_envs, asynchronous):
        reason = None
        if mode == "vector":
            reason = _vector_skip_reason(env_id, env_kwargs, seed, bool(wrappers))
        elif mode == "envpool":
            reason = _envpool_skip_reason(env_kwargs, seed, infos, bool(wrappers))
        if reason is None:
            runnable.append(mode)
        else:
            skipped.append(Probe(mode, math.nan, reason))
    probes: list[Probe] = []
    for i, mode in enumerate(runnable):
        if not probes and i == len(runnable) - 1:  # the last one standing: no need to time it
            return mode, [Probe(mode, math.nan), *skipped]
        try:
            env = build_env(
                mode,
                env_id,
                num_envs,
                asynchronous,
                env_kwargs,
                num_cpus=num_cpus,
                step_timeout=step_timeout,
                wrappers=wrappers,
            )
        except (ConfigError, EnvError) as e:
            if mode not in ("vector", "envpool"):
                raise
            skipped.append(Probe(mode, math.nan, f"it could not be built ({e})"))
            continue
        try:
            probe = _vector_probe(env, env_id, env_kwargs) if mode == "vector" else None
            probe = probe or Probe(mode, _probe(env))
        finally:
            env.close()
        (skipped if probe.skipped else probes).append(probe)
    best = max(probes, key=lambda p: p.steps_per_second)
    return best.mode, [*probes, *skipped]


def _vector_probe(env: Any, env_id: str, env_kwargs: dict[str, Any]) -> Probe:
    """The built vector candidate, timed, or skipped because its spaces differ or it fails."""
    differences = space_differences(env, env_id, env_kwargs)
    if differences:
        return Probe("vector", math.nan, _differ(differences))
    try:
        return Probe("vector", _probe(env))
    except Exception as e:
        return Probe("vector", math.nan, f"it failed when stepped ({type(e).__name__}: {e})")


def _vector_skip_reason(
    env_id: str, env_kwargs: dict[str, Any], seed: int | None, wrapped: bool
) -> str | None:
    """Why ``auto`` must not try ``vector``, as far as the spec tells; None to try it."""
    if wrapped:
        return "--wrapper is given, and Gymnasium's batched env cannot be wrapped per env"
    if seed is not None:
        return "--seed is given, and its envs draw from their own generator (other bytes)"
    differences = spec_differences(env_id, env_kwargs)
    return _differ(differences) if differences else None


def _envpool_skip_reason(
    env_kwargs: dict[str, Any], seed: int | None, infos: bool, wrapped: bool
) -> str | None:
    """Why ``auto`` must not try EnvPool's env (proven to be ``gym.make``'s); None to try it."""
    if wrapped:
        return "--wrapper is given, and EnvPool's envs are not Gymnasium envs to wrap"
    if seed is not None:
        return "--seed is given, and EnvPool's envs draw from their own generators (other bytes)"
    if env_kwargs:
        return "--env-kwargs are given: its equivalence with gym.make's env is proven without"
    if infos:
        return "--infos is given, and EnvPool reports infos of its own"
    if importlib.util.find_spec("envpool") is None:
        return 'EnvPool is not installed (pip install "expcli[envpool]")'
    return None


def _differ(differences: list[str]) -> str:
    return "its spec differs from the env gym.make builds: " + "; ".join(differences)


def _refusal(env_id: str, differences: list[str]) -> ConfigError:
    return ConfigError(
        f"--mode vector: the spec of {env_id}'s vector env differs from the env gym.make builds: "
        f"{'; '.join(differences)}; choose another --mode, or --force-mode to collect it "
        "anyway (the metadata records that)"
    )


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
