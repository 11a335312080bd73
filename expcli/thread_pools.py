"""The process's shared worker threads (read-ahead, checksums): made once, stopped at the end.

A ``ThreadPoolExecutor``'s threads are joined as Python shuts down, after each pool is told
to stop. A Ctrl-C or SIGTERM that lands while a pool starts a thread can leave that thread
unknown to the stop: the interpreter then waits for it forever at exit (seen as a hang of
a command killed by ``timeout``). So the pools shared by a whole process live here, and the
CLI stops them (``shut_down``) once a command is done, which wakes every thread they
started whatever they recorded.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["shared_pool", "shut_down"]

_POOLS: dict[str, ThreadPoolExecutor] = {}
_LOCK = threading.Lock()


def shared_pool(
    name: str, workers: int = 1, initializer: Callable[[], object] | None = None
) -> ThreadPoolExecutor:
    """The pool called ``name`` (its threads' name prefix), made on first use."""
    with _LOCK:
        pool = _POOLS.get(name)
        if pool is None:
            pool = ThreadPoolExecutor(workers, thread_name_prefix=name, initializer=initializer)
            _POOLS[name] = pool
        return pool


def shut_down() -> None:
    """Tell every shared pool to stop (without waiting); the next use makes a new one."""
    with _LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.shutdown(wait=False, cancel_futures=True)


def _forget_in_child() -> None:
    """A forked child has none of its parent's threads: it makes pools of its own."""
    global _LOCK
    _LOCK = threading.Lock()
    _POOLS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
