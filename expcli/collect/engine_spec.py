"""What a collection engine is: the row type of the engine table (``engines.ENGINES``).

An engine is how a collect run's envs are built and run (``--mode``). Its row says what
it supports (seeds, wrappers, ``--infos``, ``--async`` modes, rollout actors,
``--force-mode``) and names its builder; everything that varies by engine reads the row,
never the mode's spelling. The engine modules (``parallel_engine``, ``vector_engine``,
``envpool_engine``) import this module and nothing of the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the table is read by ``expcli --help``, which loads no gymnasium
    from expcli.envs.modes import AsyncMode

__all__ = ["AutoQuery", "BuiltEnvs", "Engine", "EngineRequest", "Envs", "differ"]


class Envs(Protocol):
    """What an engine builds: a batch of envs that ``steppers.make_stepper`` steps.

    A ``ParallelEnv``, a Gymnasium ``VectorEnv`` or ``EnvPoolEnvs``.
    """

    def close(self) -> None:
        """Close the envs."""
        ...


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """What a run asks of an engine's builder."""

    env_id: str
    num_envs: int
    asynchronous: AsyncMode
    env_kwargs: dict[str, Any]
    num_cpus: int | None = None
    ray_address: str | None = None
    step_timeout: float | None = None
    wrappers: tuple[str, ...] = ()
    seed: int | None = None
    force: bool = False  # --force-mode: build even where the env differs from gym.make's


@dataclass(frozen=True, slots=True)
class BuiltEnvs:
    """An engine's envs, and how they differ from ``gym.make``'s env (``--force-mode``)."""

    envs: Envs
    differences: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AutoQuery:
    """What ``auto`` asks each engine: would it run this, and why not."""

    env_id: str
    num_envs: int
    asynchronous: AsyncMode
    env_kwargs: dict[str, Any]
    seed: int | None
    wrapped: bool
    infos: bool


@dataclass(frozen=True, slots=True)
class Engine:
    """One row of the engine table.

    Attributes:
        mode: Its ``--mode`` spelling.
        build: Builds its envs (raises ``ConfigError``, ``EnvError`` or
            ``MissingDependencyError``).
        check_id: Checks an env id before anything is built (raises ``ConfigError``).
        async_refusal: Why it does not run an ``--async`` mode (the error's message), or
            None when it does; None: it runs every mode.
        wrappers_refused: The error when ``--wrapper`` is given; None: it wraps each env.
        own_implementation: Another implementation of the env, drawing from its own
            generators (other bytes for a seed than the ``ParallelEnv`` modes): ``auto``
            tries it only as ``auto_skip`` allows and skips it when it fails to build or
            step; ``--resume`` never switches to or from it.
        auto_rank: Its place among ``auto``'s candidates (cheapest to start first); None:
            never a candidate.
        auto_candidate: Whether ``auto`` considers it for an env and a number of envs.
        auto_skip: Why ``auto`` must not try it for a run; None: try it.
        rollout_actors: It runs Ray rollout actors where they apply (see
            ``rollout.job``).
        actor_workers: Each rollout actor steps its envs in worker processes.
        force_mode: ``--force-mode`` applies.
        uses_ray: Its envs run on a Ray cluster (``--ray-address``).
    """

    mode: str
    build: Callable[[EngineRequest], BuiltEnvs]
    check_id: Callable[[str], object]
    async_refusal: Callable[[AsyncMode], str | None] | None = None
    wrappers_refused: str | None = None
    own_implementation: bool = False
    auto_rank: int | None = None
    auto_candidate: Callable[[AutoQuery], bool] | None = None
    auto_skip: Callable[[AutoQuery], str | None] | None = None
    rollout_actors: bool = False
    actor_workers: bool = False
    force_mode: bool = False
    uses_ray: bool = False

    def refuses_async(self, asynchronous: AsyncMode) -> str | None:
        """Why this engine does not run ``asynchronous``; None when it does."""
        return None if self.async_refusal is None else self.async_refusal(asynchronous)


def differ(differences: list[str]) -> str:
    """Why ``auto`` skips an engine whose env is not the one ``gym.make`` builds."""
    return "its spec differs from the env gym.make builds: " + "; ".join(differences)
