"""The Ray a backend runs on: the user's, a cluster's, or a local one started here.

A local Ray started by this module is shut down when the last backend using it closes; a
Ray the user started (``ray.init``) is used as is and left running.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from expcli.errors import EnvError, MissingDependencyError

__all__ = ["connect", "disconnect"]

_lock = threading.Lock()
_owned = False  # this module called ray.init
_users = 0  # live backends on that Ray


def connect(address: str | None, num_cpus: int | None, num_gpus: int | float) -> tuple[Any, bool]:
    """The ``ray`` module, initialized, and whether this module started it.

    Ray is the running one, a cluster, or a new local one; one started here is the caller's
    to ``disconnect``.
    """
    global _owned, _users
    try:
        import ray
    except ImportError as e:
        raise MissingDependencyError("ray", "ray", "the ray modes") from e
    with _lock:
        if not ray.is_initialized():
            target = address or os.environ.get("RAY_ADDRESS")
            local = {"num_cpus": num_cpus, "num_gpus": num_gpus or None, "include_dashboard": False}
            kwargs: dict[str, Any] = {"address": target} if target else local
            try:
                ray.init(**kwargs, log_to_driver=False, ignore_reinit_error=True)
            except Exception as e:
                where = f"join the Ray cluster at {target}" if target else "start a local Ray"
                raise EnvError(f"could not {where}: {e}") from e
            _owned, _users = True, 0
        if _owned:
            _users += 1
        return ray, _owned


def disconnect(ray: Any) -> None:
    """Shut down the Ray this module started once its last backend is closed."""
    global _owned, _users
    with _lock:
        _users -= 1
        if _users <= 0:
            _owned, _users = False, 0
            if ray.is_initialized():
                ray.shutdown()
