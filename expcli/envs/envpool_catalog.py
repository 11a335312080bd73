"""The catalog of EnvPool's envs, with the spaces expcli stores, for ``expcli envs --envpool``.

Spaces come from EnvPool's env specs (no env is built), with the settings ``--mode
envpool`` uses: an Atari id is listed with the one-frame observations expcli stores (it
stacks at sample time). An id whose spec cannot be made (a system library missing, say)
is listed with the reason; one id never aborts the listing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["EnvPoolEntry", "list_envpool_envs"]


@dataclass(frozen=True, slots=True)
class EnvPoolEntry:
    """One EnvPool id.

    Attributes:
        id: EnvPool's task id (what ``expcli collect ID --mode envpool`` takes).
        family: EnvPool's module of the env (``envpool.atari``, ...).
        max_episode_steps: The time limit (None: none).
        gym_equivalent: Whether it is the env ``gym.make(id)`` builds, so that ``--mode
            auto`` may run it through EnvPool.
        observation_space: Compact description (None when not asked, or it failed).
        action_space: Compact description.
        frame_stack: Frames a stored observation stands for (stacked at sample time).
        error: Why the spec could not be made.
    """

    id: str
    family: str
    max_episode_steps: int | None = None
    gym_equivalent: bool = False
    observation_space: str | None = None
    action_space: str | None = None
    frame_stack: int | None = None
    error: str | None = None

    @property
    def status(self) -> str:
        """``ok``, ``error: ...`` or ``""`` (spaces not asked)."""
        if self.error is not None:
            return f"error: {self.error}"
        return "ok" if self.observation_space is not None else ""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the fields, and ``status``)."""
        return {**asdict(self), "status": self.status}


def list_envpool_envs(pattern: str | None = None, *, spaces: bool = True) -> list[EnvPoolEntry]:
    """EnvPool's ids containing ``pattern`` (case-insensitive), sorted.

    Raises:
        MissingDependencyError: EnvPool is not installed.
    """
    from expcli.envs.envpool_envs import envpool_ids, gym_equivalent, import_envpool

    envpool = import_envpool()
    registry = getattr(getattr(envpool, "registration", None), "registry", None)
    families = getattr(registry, "specs", {})
    needle = (pattern or "").lower()
    entries = []
    for env_id in sorted(envpool_ids(), key=str.lower):
        if needle not in env_id.lower():
            continue
        family = families.get(env_id, ("",))[0]
        entry = EnvPoolEntry(env_id, family, gym_equivalent=gym_equivalent(env_id, {}))
        entries.append(_with_spaces(entry) if spaces else entry)
    return entries


def _with_spaces(entry: EnvPoolEntry) -> EnvPoolEntry:
    """The entry with its spaces, time limit and stack, or the reason it has none."""
    import dataclasses
    import warnings

    from expcli.envs.catalog import describe_space
    from expcli.envs.envpool_envs import import_envpool, run_kwargs

    try:
        kwargs, time_limit, frame_stack = run_kwargs(entry.id, {})
        kwargs.pop("max_episode_steps", None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = import_envpool().make_spec(entry.id, **kwargs)
            observation_space = spec.gymnasium_observation_space
            action_space = spec.gymnasium_action_space
        return dataclasses.replace(
            entry,
            max_episode_steps=time_limit,
            observation_space=describe_space(observation_space),
            action_space=describe_space(action_space),
            frame_stack=frame_stack["stack_num"] if frame_stack else None,
        )
    except Exception as e:
        message = " ".join(str(e).split()) or type(e).__name__
        return dataclasses.replace(entry, error=message)
