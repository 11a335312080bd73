"""The table of collection engines: one row per ``--mode``, read by everything that varies by it.

Settings validation (``settings``), ``auto``'s candidates (``env_modes``), the job, the
rollout actors (``rollout.job``) and the CLI (``--mode``'s choices and help, the
lines it prints) read a row's fields (``engine_spec.Engine``) instead of comparing the
mode's spelling. A new engine is one module (its builder) and one row here, under a
member of ``CollectMode``.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from expcli.collect import envpool_engine as envpool
from expcli.collect import vector_engine as vector
from expcli.collect.engine_spec import Engine
from expcli.collect.parallel_engine import check_gym_id, parallel_builder, worth_processes

__all__ = ["ENGINES", "CollectMode", "engine_of", "mode_list"]


class CollectMode(StrEnum):
    """``expcli collect --mode``: ``auto`` (the fastest that gives the same data), or an engine."""

    AUTO = "auto"
    DUMMY = "dummy"
    SUBPROC = "subproc"
    RAY = "ray"
    RAY_SUBPROC = "ray-subproc"
    VECTOR = "vector"
    ENVPOOL = "envpool"


def _always(query: object) -> bool:
    return True


ENGINES: Mapping[CollectMode, Engine] = {
    CollectMode.DUMMY: Engine(
        "dummy", parallel_builder("dummy"), check_gym_id,
        auto_rank=1, auto_candidate=_always,
    ),
    CollectMode.SUBPROC: Engine(
        "subproc", parallel_builder("subproc"), check_gym_id,
        auto_rank=2, auto_candidate=worth_processes,
    ),
    CollectMode.RAY: Engine(
        "ray", parallel_builder("ray"), check_gym_id,
        rollout_actors=True, uses_ray=True,
    ),
    CollectMode.RAY_SUBPROC: Engine(
        "ray-subproc", parallel_builder("ray-subproc"), check_gym_id,
        rollout_actors=True, actor_workers=True, uses_ray=True,
    ),
    CollectMode.VECTOR: Engine(
        "vector", vector.build_vector, vector.check_vector_id,
        async_refusal=vector.vector_async_refusal,
        wrappers_refused=vector.VECTOR_WRAPPERS_REFUSED,
        own_implementation=True, force_mode=True,
        auto_rank=0, auto_candidate=vector.vector_candidate, auto_skip=vector.vector_skip,
    ),
    CollectMode.ENVPOOL: Engine(
        "envpool", envpool.build_envpool, envpool.check_envpool_engine_id,
        async_refusal=envpool.envpool_async_refusal,
        wrappers_refused=envpool.ENVPOOL_WRAPPERS_REFUSED,
        own_implementation=True,
        auto_rank=3, auto_candidate=envpool.envpool_candidate, auto_skip=envpool.envpool_skip,
    ),
}  # fmt: skip
"""Each engine's row, in the order ``--mode``'s help lists them."""


def engine_of(mode: object) -> Engine | None:
    """The row of the engine a spelling names; None for ``auto`` or a spelling of no engine."""
    if not isinstance(mode, str):
        return None
    try:
        return ENGINES.get(CollectMode(mode))
    except ValueError:
        return None


def mode_list(conjunction: str = "or") -> str:
    """``auto`` and the engines, as help texts list them: ``auto, dummy, ... or envpool``."""
    names = [m.value for m in CollectMode]
    return f"{', '.join(names[:-1])} {conjunction} {names[-1]}"
