"""The worker side of the subproc backend, and what both sides share.

A worker process builds its slice of the envs over its rows of the shared buffers, then
serves the parent's commands: the common step arrives as one byte (actions already in
shared memory), anything else as a tag and a pickle. Between commands it polls before it
blocks (see ``Doorbell``). It writes the index of the env it is calling into its slot of
a shared progress array, where the parent sees a hung env. It ignores SIGINT and SIGTERM:
the parent stops it.
"""

from __future__ import annotations

import contextlib
import enum
import os
import pickle
import select
import signal
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext
from typing import Any

import gymnasium as gym
import numpy as np

from expcli.envs.env_group import EnvGroup, ErrorRecord, GroupError, Slots, fixed_shape
from expcli.errors import InvalidValueError

__all__ = [
    "PICKLED",
    "STEP_ALL",
    "STEP_ALL_RESET",
    "Command",
    "Doorbell",
    "SharedBuffers",
    "required",
    "usable_cpus",
    "worker_main",
]

Factory = Callable[[], gym.Env[Any, Any]]

# Seconds a worker polls for its next command (yielding its core) before it blocks. A
# blocked process is slow to wake on a small virtual machine (0.5-1.5 ms: the idle vCPU
# halts), more than a slice of cheap envs takes to step; a parent that takes longer than
# this between steps is slow enough that the wake-up no longer matters.
_SPIN = 0.02
# Messages are bytes: one byte for the common step, else a tag and a pickle.
STEP_ALL, STEP_ALL_RESET, PICKLED = b"s", b"S", b"P"


class Command(enum.IntEnum):
    """What the parent asks of a worker."""

    STEP = 0
    RESET = 1
    GET_ATTR = 2
    SET_ATTR = 3
    CALL = 4
    CLOSE = 5
    START = 6  # never sent: names the wait for a new worker's first message


@dataclass
class SharedBuffers:
    """Shared-memory buffers for all envs, and how to view them as numpy arrays."""

    obs: Any
    obs_layout: tuple[tuple[int, ...], str] | None
    actions: Any
    action_layout: tuple[tuple[int, ...], str] | None
    rewards: Any
    terminated: Any
    truncated: Any
    num_envs: int

    @classmethod
    def allocate(
        cls, ctx: SpawnContext, n: int, obs_space: gym.Space[Any], act_space: gym.Space[Any]
    ) -> SharedBuffers:
        """Shared arrays for the actions and observations of ``n`` envs (None: not fixed-size)."""

        def raw(shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
            return ctx.RawArray("b", max(1, int(np.prod((n, *shape))) * dtype.itemsize))

        obs_fixed, act_fixed = fixed_shape(obs_space), fixed_shape(act_space)
        return cls(
            raw(*obs_fixed) if obs_fixed else None,
            (obs_fixed[0], obs_fixed[1].str) if obs_fixed else None,
            raw(*act_fixed) if act_fixed else None,
            (act_fixed[0], act_fixed[1].str) if act_fixed else None,
            raw((), np.dtype(np.float64)),
            raw((), np.dtype(bool)),
            raw((), np.dtype(bool)),
            n,
        )

    def view(self, name: str) -> np.ndarray | None:
        """The numpy view of a buffer over all envs (None when it is not shared)."""
        buffer = getattr(self, name)
        if buffer is None:
            return None
        layout = {"obs": self.obs_layout, "actions": self.action_layout}.get(name)
        shape, dtype = layout if layout else ((), {"rewards": "<f8"}.get(name, "|b1"))
        return np.frombuffer(
            buffer, dtype=np.dtype(dtype), count=self.num_envs * int(np.prod(shape))
        ).reshape(self.num_envs, *shape)


def worker_main(
    conn: Connection,
    factories: list[Factory],
    offset: int,
    shared: SharedBuffers,
    progress: tuple[Any, int],
    restart_on_error: bool,
    no_warning: bool,
    cpu: int | None,
    parent_pid: int | None,
) -> None:
    """Body of a worker process: build the envs, then serve commands until CLOSE or EOF.

    ``progress`` is the shared int64 array of every worker's busy env and this worker's
    index in it; with ``parent_pid`` the worker dies with that parent (Linux).
    """
    _leave_signals_to_parent(parent_pid)
    with contextlib.suppress(OSError, ValueError):  # the parent's stdout is its own output
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if cpu is not None:
        with contextlib.suppress(OSError):  # a container may forbid it: run unpinned
            os.sched_setaffinity(0, {cpu})
    if no_warning:
        warnings.simplefilter("ignore")
    host: _Host | None = None
    try:
        try:
            busy = memoryview(progress[0]).cast("B").cast("q")[progress[1] : progress[1] + 1]
            host = _Host.build(factories, offset, shared, busy, restart_on_error, no_warning=False)
        except GroupError as e:
            conn.send_bytes(_reply(False, e.record))
            return
        conn.send_bytes(_reply(True, None))
        doorbell = Doorbell(conn)
        while True:
            try:
                doorbell.wait(_SPIN)
                message = conn.recv_bytes()
            except (EOFError, OSError):
                return  # the parent is gone
            command = Command.STEP
            try:
                if message in (STEP_ALL, STEP_ALL_RESET):
                    result = host.step_all(message == STEP_ALL_RESET)
                    conn.send_bytes(b"" if result is None else _reply(True, result))
                    continue
                command, payload = pickle.loads(message[1:])  # from our own parent
                if command == Command.CLOSE:
                    conn.send_bytes(_reply(True, None))
                    return
                conn.send_bytes(_reply(True, host.run(command, payload)))
            except GroupError as e:
                conn.send_bytes(_reply(False, e.record))
            except (Exception, KeyboardInterrupt) as e:
                # A bug of ours, an unpicklable result, or an env raising KeyboardInterrupt
                # (the worker ignores SIGINT, so it came from the env): report it, go on.
                conn.send_bytes(_reply(False, ErrorRecord.capture(offset, command.name.lower(), e)))
    finally:
        if host is not None:
            host.group.close()
        conn.close()


class _Host:
    """Runs a worker's commands on its slice of envs, results into shared memory."""

    def __init__(self, group: EnvGroup, actions: np.ndarray | None) -> None:
        self.group, self.slots, self.actions = group, group.slots, actions
        self.everyone = list(range(len(group.envs)))
        self.obs_shared = isinstance(group.slots.obs, np.ndarray)

    @classmethod
    def build(
        cls,
        factories: Sequence[Factory],
        offset: int,
        shared: SharedBuffers,
        busy: memoryview,
        restart_on_error: bool,
        no_warning: bool,
    ) -> _Host:
        """Build the slice's envs over its rows of the shared buffers.

        Raises:
            GroupError: A factory failed.
        """
        rows = slice(offset, offset + len(factories))
        obs, actions = shared.view("obs"), shared.view("actions")
        rewards, terminated, truncated = (
            required(shared.view(name))[rows] for name in ("rewards", "terminated", "truncated")
        )
        slots = Slots(
            obs[rows] if obs is not None else [None] * len(factories),
            rewards,
            terminated,
            truncated,
        )
        group = EnvGroup(factories, offset, slots, restart_on_error, no_warning, busy)
        return cls(group, actions[rows] if actions is not None else None)

    def step_all(self, autoreset: bool) -> Any:
        """Step every env with its shared action; None when there is nothing to report."""
        infos, restarted = self.group.step(self.everyone, required(self.actions), autoreset)
        if not (infos or restarted or not self.obs_shared):
            return None
        return infos, restarted, self._observations(self.everyone)

    def run(self, command: Command, payload: Any) -> Any:
        """Any other command; see ``SubprocBackend`` for the payloads."""
        group = self.group
        if command == Command.STEP:
            local, autoreset, sent = payload
            actions = sent if sent is not None else required(self.actions)[local]
            infos, restarted = group.step(local, actions, autoreset)
            return infos, restarted, self._observations(local)
        if command == Command.RESET:
            local, seeds, options = payload
            return group.reset(local, seeds, options), self._observations(local)
        if command == Command.GET_ATTR:
            return group.get_attr(*payload)
        if command == Command.SET_ATTR:
            return group.set_attr(*payload)
        if command == Command.CALL:
            return group.call(*payload)
        raise InvalidValueError(f"unknown command {command!r}")

    def _observations(self, local: list[int]) -> dict[int, Any] | None:
        return None if self.obs_shared else {i: self.slots.obs[i] for i in local}


def _leave_signals_to_parent(parent_pid: int | None) -> None:
    """Ignore the group's Ctrl-C and SIGTERM.

    With ``parent_pid``, die with the parent even while stuck in an env.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if parent_pid is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(0)  # the parent died before prctl took effect


def usable_cpus() -> list[int]:
    """The CPUs this process may run on (all of them where affinity is unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


class Doorbell:
    """A worker's wait for its next command: poll, yielding the core, then block.

    While a worker polls, its core never idles, so the command is seen within
    microseconds and the parent, blocked on the answers, wakes on a busy core, which is
    quick too. ``sched_yield`` hands the core to whoever has work, such as the parent,
    which shares a core with a worker once there are as many workers as cores. One
    ``select.poll`` object is kept: ``Connection.poll`` builds a selector on every call.
    The parent waits for a worker's answer through one too (``ready``).
    """

    def __init__(self, conn: Connection) -> None:
        self._poll: Callable[[int], Any]
        self._poll_ms: Callable[[int], Any] | None = None
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(conn.fileno(), select.POLLIN)
            self._poll = self._poll_ms = poller.poll
        else:  # Windows
            self._poll = conn.poll

    def ready(self, seconds: float) -> bool:
        """Whether readable (or closed), blocking up to ``seconds``."""
        if self._poll_ms is not None:
            return bool(self._poll_ms(max(0, round(seconds * 1000))))
        return bool(self._poll(seconds))  # type: ignore[arg-type]  # Connection.poll: seconds

    def wait(self, seconds: float) -> None:
        """Return once readable (or closed), or after polling for ``seconds``."""
        poll = self._poll
        if poll(0):
            return
        deadline = time.perf_counter() + seconds
        while not poll(0):
            os.sched_yield()
            if time.perf_counter() > deadline:
                return


def required(array: np.ndarray | None) -> np.ndarray:
    """``array``, which the caller knows is there (narrows the type)."""
    assert array is not None
    return array


def _reply(ok: bool, result: Any) -> bytes:
    return pickle.dumps((ok, result), pickle.HIGHEST_PROTOCOL)
