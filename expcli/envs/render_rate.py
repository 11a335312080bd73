"""The frame rate an env declares (Gymnasium's ``metadata["render_fps"]``), found without a run.

LeRobot folders need an fps: its ``timestamp`` is the frame index over it. Gymnasium envs
declare the rate they render at (CartPole 50, Pong 30); a registered id's env class carries
it as a class attribute, so the class is loaded, not made (no ROM, no simulator). An entry
point that is a function, not a class, is made once and closed.
"""

from __future__ import annotations

import functools

__all__ = ["declared_fps"]


@functools.lru_cache(maxsize=64)
def declared_fps(env_id: str) -> int | None:
    """The whole frames per second ``env_id``'s env declares, or None where it says none.

    ``env_id`` may name its registering module (``ale_py:ALE/Pong-v5``), which is imported
    only when it is the known package of such ids (``registering_package``): an env id
    read from a file is data, and importing a module it names would run its code. An id
    that is not registered then, an env that fails to load, or a rate that is no positive
    number gives None: the caller says what it does without one.
    """
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    from expcli.envs.env_ids import bare_id, import_registering, registering_package

    module = env_id.rpartition(":")[0]
    known = registering_package(env_id)
    try:
        if module and known is not None and known[0] == module:
            import_registering(module)
        spec = gym.spec(bare_id(env_id))
        entry = spec.entry_point
        creator = load_env_creator(entry) if isinstance(entry, str) else entry
        metadata = getattr(creator, "metadata", None) if isinstance(creator, type) else None
        if metadata is None:
            env = gym.make(bare_id(env_id))
            metadata = env.metadata
            env.close()
    except Exception:  # any env package's failure: the rate is unknown, not an error
        return None
    fps = metadata.get("render_fps") if isinstance(metadata, dict) else None
    if isinstance(fps, bool) or not isinstance(fps, int | float) or not fps >= 0.5:
        return None
    return round(fps)
