"""The choices a user types for how envs run: the backend mode and the asynchronous mode.

One definition each, as ``StrEnum``s: a member is its spelling (``EnvMode.SUBPROC ==
"subproc"``), so a config file's string, a CLI option and library code compare alike.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["AsyncMode", "EnvMode"]


class EnvMode(StrEnum):
    """Where a ``ParallelEnv`` runs its envs."""

    DUMMY = "dummy"
    SUBPROC = "subproc"
    RAY = "ray"
    RAY_SUBPROC = "ray-subproc"

    @property
    def uses_ray(self) -> bool:
        """Whether the envs live in Ray actors."""
        return self in (EnvMode.RAY, EnvMode.RAY_SUBPROC)


class AsyncMode(StrEnum):
    """What happens to an env once its episode is over (``ParallelEnv``'s ``asynchronous``).

    ``NONE``: once any env is done every env is done. ``IDLE``: done envs wait while the
    others step on. ``RESTART``: a done env is reset at once. ``CONTINUE``: every env steps
    whatever its state. The library also takes Python's ``None`` for ``NONE``.
    """

    NONE = "none"
    IDLE = "idle"
    RESTART = "restart"
    CONTINUE = "continue"

    @classmethod
    def of(cls, value: str | None) -> AsyncMode:
        """The mode a user's value names: ``None`` and any case of a spelling.

        Raises:
            ValueError: Not one of the modes.
        """
        return cls.NONE if value is None else cls(str(value).lower())
