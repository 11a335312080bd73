"""The Ray a backend runs on: the user's, a cluster's, or a local one started here.

A local Ray started by this module is shut down when the last backend using it closes; a
Ray the user started (``ray.init``) is used as is and left running.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from expcli.errors import EnvError, MissingDependencyError

__all__ = ["auth_hint", "connect", "disconnect"]

_OBJECT_STORE_BYTES = 512 << 20
"""Object store of a local Ray started here. Chunks in flight take at most 128 MB (the
rollout driver's bound); Ray's default, 30 % of RAM, would let the shared memory a long
run touches grow to that size in every process that reads from it."""

_lock = threading.Lock()
_owned = False  # this module called ray.init
_users = 0  # live backends on that Ray


def connect(
    address: str | None,
    num_cpus: int | None,
    num_gpus: int | float,
    say: Callable[[str], None] | None = None,
) -> tuple[ModuleType, bool]:
    """The ``ray`` module, initialized, and whether this module started it.

    Ray is the running one, a cluster, or a new local one; one started here is the caller's
    to ``disconnect``. ``say`` tells the user that a local Ray is starting (seconds).

    Raises:
        EnvError: Ray could not start, or the cluster could not be joined (the message
            says what a cluster with token authentication needs).
    """
    global _owned, _users
    try:
        import ray
    except ImportError as e:
        raise MissingDependencyError("ray", "ray", "the ray modes") from e
    with _lock:
        if not ray.is_initialized():
            target = address or os.environ.get("RAY_ADDRESS")
            local = {
                # "local": a new Ray, never one that `ray start` left (maybe dead) in /tmp/ray
                "address": "local",
                "num_cpus": num_cpus,
                "num_gpus": num_gpus or None,
                "include_dashboard": False,
                "object_store_memory": _OBJECT_STORE_BYTES,
            }
            kwargs: dict[str, Any] = {"address": target} if target else local
            if not target and say is not None:
                say("no Ray cluster given (--ray-address, RAY_ADDRESS): starting a local Ray")
            try:
                ray.init(**kwargs, log_to_driver=False, ignore_reinit_error=True)
            except Exception as e:
                if not target:
                    raise EnvError(f"could not start a local Ray: {e}") from e
                first = str(e).splitlines()[0] if str(e) else type(e).__name__
                raise EnvError(
                    f"could not join the Ray cluster at {target}: {first}; {auth_hint()}"
                ) from e
            _owned, _users = True, 0
        if _owned:
            _users += 1
        return ray, _owned


def disconnect(ray: ModuleType) -> None:
    """Shut down the Ray this module started once its last backend is closed."""
    global _owned, _users
    with _lock:
        _users -= 1
        if _users <= 0:
            _owned, _users = False, 0
            if ray.is_initialized():
                ray.shutdown()


def auth_hint(environ: dict[str, str] | None = None, home: Path | None = None) -> str:
    """What a cluster with Ray's token authentication needs from this process.

    And whether it has a token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, or
    ``~/.ray/auth_token``).
    """
    env = os.environ if environ is None else environ
    default = (Path.home() if home is None else home) / ".ray" / "auth_token"
    given = (
        "RAY_AUTH_TOKEN"
        if env.get("RAY_AUTH_TOKEN")
        else f"RAY_AUTH_TOKEN_PATH={env['RAY_AUTH_TOKEN_PATH']}"
        if env.get("RAY_AUTH_TOKEN_PATH")
        else str(default)
        if default.is_file()
        else None
    )
    how = (
        "set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN=<token> (or RAY_AUTH_TOKEN_PATH=<file>, "
        "or copy it to ~/.ray/auth_token); `ray get-auth-token` on the head node prints it"
    )
    if given is None:
        return (
            "if the cluster uses token authentication (RAY_AUTH_MODE=token, the default in "
            f"current Ray), this process needs the cluster's auth token and has none: {how}"
        )
    return (
        f"if the cluster uses token authentication, check that the token from {given} is "
        f"the cluster's (and RAY_AUTH_MODE=token): {how}"
    )
