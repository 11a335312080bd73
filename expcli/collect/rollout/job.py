"""How a collect job runs ``--mode ray`` / ``ray-subproc`` with rollout actors.

Rollout actors (``fleet``, ``collector``) step their envs and their own
copy of the policy many steps per call. They serve ``--async restart`` (the default)
without ``--infos``; other runs take the step-level path (``ParallelEnv``'s ray backend:
one actor call per step, the policy in the driver).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from expcli.collect.engine_spec import Engine
from expcli.collect.settings import CollectSettings
from expcli.envs.modes import AsyncMode
from expcli.named_callables import is_file_target

if TYPE_CHECKING:
    from expcli.collect.rollout.fleet import RolloutFleet

__all__ = ["build_fleet", "policy_file", "rollout_applies"]


def rollout_applies(settings: CollectSettings, engine: Engine) -> bool:
    """Whether this run's engine runs rollout actors (else one actor call per step)."""
    return (
        engine.rollout_actors and settings.asynchronous is AsyncMode.RESTART and not settings.infos
    )


def policy_file(spec: str) -> tuple[str, bytes] | None:
    """(name, bytes) of the file a policy spec names (shipped to the actors), or None."""
    text = spec.strip()
    if text.lower().endswith((".pt", ".pt2")):
        path = Path(text)
    elif ":" in text and is_file_target(text.rsplit(":", 1)[0]):
        path = Path(text.rsplit(":", 1)[0])
    else:
        return None
    # A missing file is reported by make_policy in the driver, with the usual message.
    return (path.name, path.read_bytes()) if path.is_file() else None


def build_fleet(
    settings: CollectSettings,
    engine: Engine,
    wrappers: list[str],
    say: Callable[[str], None] | None = None,
) -> tuple[RolloutFleet, int]:
    """The rollout actors of a run, and the seed its random streams derive from.

    Raises:
        EnvError: Ray could not start or join, or an actor could not build its envs.
        ConfigError: The policy failed to load in an actor.
    """
    from expcli.collect.rollout.actor import SliceSpec
    from expcli.collect.rollout.fleet import RolloutFleet

    s = settings
    policy_seed = s.seed if s.seed is not None else secrets.randbits(128)  # as SeedSequence()
    base = SliceSpec(
        env_id=s.env_id,
        env_kwargs=dict(s.env_kwargs),
        wrappers=tuple(wrappers),
        lo=0,
        hi=s.envs,
        subproc=engine.actor_workers,
        workers=None,
        step_timeout=s.step_timeout_seconds,
        seed=s.seed,
        policy=s.policy.strip(),
        policy_seed=policy_seed,
        rewards_dtype=s.rewards_dtype,
        policy_file=policy_file(s.policy),
    )
    fleet = RolloutFleet(
        base,
        s.envs,
        subproc=engine.actor_workers,
        num_cpus=s.num_cpus,
        address=s.ray_address,
        say=say,
    )
    return fleet, policy_seed
