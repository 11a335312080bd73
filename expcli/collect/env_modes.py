"""Building the envs of a collect run in the mode asked for, or choosing the fastest (``auto``).

Each engine's builder and what ``auto`` may try are rows of the engine table (``engines``).

``vector`` is Gymnasium's own batched implementation of an env, where one is registered
(``gym.make_vec(..., vectorization_mode="vector_entry_point")``, e.g. CartPole);
``envpool`` is EnvPool's C++ implementation (the ``envpool`` extra); the other modes are
``ParallelEnv``'s. ``auto`` builds each candidate, steps it briefly with random actions,
closes it, and names the fastest; for a run shorter than a probe it stops at the first
candidate that would finish it sooner (``SHORT_RUN``). It never changes the data: every
``ParallelEnv`` mode gives the same bytes for the same seed, and ``vector`` and ``envpool`` (other
implementations, with their own generators) are candidates only without a seed and where
they are the env ``gym.make`` builds (``vector_checks``; ``envpool_envs.gym_equivalent``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from expcli.collect.engine_spec import AutoQuery, Engine, EngineRequest, Envs, differ
from expcli.collect.engines import ENGINES, CollectMode
from expcli.envs.modes import AsyncMode
from expcli.errors import ConfigError, EnvError

__all__ = ["SHORT_RUN", "Probe", "build_env", "candidate_modes", "choose_mode"]

_PROBE_SECONDS = 0.3

SHORT_RUN = "not tried: the run takes less time than a probe"
"""Why ``auto`` tried no more candidates: the run is done sooner than one more probe."""


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
) -> Envs:
    """The envs of one mode (its row's builder, ``engines.ENGINES``).

    A ``ParallelEnv``, a Gymnasium vector env for ``vector``, or ``EnvPoolEnvs`` for ``envpool``
    (whose seeds, ``seed + i``, are fixed here).

    ``step_timeout`` applies to the ``ParallelEnv`` modes (Gymnasium's vector envs have none).
    ``wrappers`` (``MODULE:CALLABLE`` specs) wrap each env right after ``gym.make``.

    Raises:
        ConfigError: Unknown env id or mode, bad kwargs, or ``vector`` for an env without
            one (or whose spec differs from ``gym.make``'s env).
        EnvError: The envs could not be built.
        MissingDependencyError: ``envpool`` without the extra.
    """
    request = EngineRequest(
        env_id,
        num_envs,
        AsyncMode.of(asynchronous),
        env_kwargs,
        num_cpus=num_cpus,
        ray_address=ray_address,
        step_timeout=step_timeout,
        wrappers=tuple(wrappers),
        seed=seed,
        force=True,
    )
    return _engine(mode).build(request).envs


def _engine(mode: str) -> Engine:
    try:
        return ENGINES[CollectMode(mode)]
    except (ValueError, KeyError):
        names = ", ".join(m.value for m in ENGINES)
        raise ConfigError(f"--mode must be one of {names}, got {mode!r}") from None


def candidate_modes(env_id: str, num_envs: int, asynchronous: str | None) -> list[CollectMode]:
    """The modes ``auto`` considers, cheapest to start first."""
    query = AutoQuery(env_id, num_envs, AsyncMode.of(asynchronous), {}, None, False, False)
    return _candidates(query)


def _candidates(query: AutoQuery) -> list[CollectMode]:
    ranked = sorted(
        (engine.auto_rank, mode)
        for mode, engine in ENGINES.items()
        if engine.auto_rank is not None
        and engine.auto_candidate is not None
        and engine.refuses_async(query.asynchronous) is None
        and engine.auto_candidate(query)
    )
    return [mode for _, mode in ranked]


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
    steps: int | None = None,
) -> tuple[CollectMode, list[Probe]]:
    """The fastest mode that stores the data every mode stores, and what was tried.

    An engine that is another implementation of the env (``vector``, ``envpool``) is
    considered only as its row's ``auto_skip`` allows: no ``seed`` (its envs draw from
    their own generator), it is the env ``gym.make`` builds, and so on; one that cannot be
    built or stepped is skipped too. Each candidate is built, stepped for a moment and
    closed: the caller builds the chosen mode afresh, because some envs'
    ``reset(seed)`` is not a full reset, and probed envs would change the data.

    Probing never outlasts a run of ``steps`` transitions (None: no end known): a probe
    stops after as many steps as the run, and once a probed mode would finish the run in
    less time than a probe takes, the candidates left are not tried (``SHORT_RUN``).

    Returns:
        The chosen mode and one ``Probe`` per candidate (skipped ones with their reason).
    """
    query = AutoQuery(
        env_id, num_envs, AsyncMode.of(asynchronous), env_kwargs, seed, bool(wrappers), infos
    )
    skipped: list[Probe] = []
    runnable: list[CollectMode] = []
    for mode in _candidates(query):
        skip = ENGINES[mode].auto_skip
        reason = None if skip is None else skip(query)
        if reason is None:
            runnable.append(mode)
        else:
            skipped.append(Probe(mode, math.nan, reason))
    probes: list[Probe] = []
    request = EngineRequest(
        env_id,
        num_envs,
        query.asynchronous,
        env_kwargs,
        num_cpus=num_cpus,
        step_timeout=step_timeout,
        wrappers=tuple(wrappers),
        force=True,  # a differing env is skipped below, not refused
    )
    for i, mode in enumerate(runnable):
        if not probes and i == len(runnable) - 1:  # the last one standing: no need to time it
            return mode, [Probe(mode, math.nan), *skipped]
        engine = ENGINES[mode]
        try:
            built = engine.build(request)
        except (ConfigError, EnvError) as e:
            if not engine.own_implementation:
                raise
            skipped.append(Probe(mode, math.nan, f"it could not be built ({e})"))
            continue
        try:
            probe = _timed(mode, built.envs, built.differences, engine.own_implementation, steps)
        finally:
            built.envs.close()
        (skipped if probe.skipped else probes).append(probe)
        if probes and steps is not None and i < len(runnable) - 1:
            fastest = max(p.steps_per_second for p in probes)
            if steps < fastest * _PROBE_SECONDS:
                skipped += [Probe(m, math.nan, SHORT_RUN) for m in runnable[i + 1 :]]
                break
    best = max(probes, key=lambda p: p.steps_per_second)
    return CollectMode(best.mode), [*probes, *skipped]


def _timed(mode: str, envs: Envs, differences: list[str], own: bool, steps: int | None) -> Probe:
    """The built candidate, timed; an own implementation is skipped when it differs or fails."""
    if differences:
        return Probe(mode, math.nan, differ(differences))
    if not own:
        return Probe(mode, _probe(envs, steps))
    try:
        return Probe(mode, _probe(envs, steps))
    except Exception as e:
        return Probe(mode, math.nan, f"it failed when stepped ({type(e).__name__}: {e})")


def _probe(env: Envs, steps: int | None) -> float:
    """Env steps per second with random actions, over a short burst after a warm-up.

    The burst lasts ``_PROBE_SECONDS``, or until it has made the run's ``steps``.
    """
    from expcli.collect.policies import RandomPolicy
    from expcli.collect.steppers import make_stepper

    stepper = make_stepper(env)
    policy = RandomPolicy(stepper.action_space, stepper.num_envs, 0)
    stepper.reset(None)
    for _ in range(5):
        stepper.step(policy())
    limit = math.inf if steps is None else steps
    made = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < _PROBE_SECONDS and made < limit:
        for _ in range(10):
            stepper.step(policy())
        made += 10 * stepper.num_envs
    return made / elapsed
