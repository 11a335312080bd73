"""Envs that hang, and calls given up on request: the step timeout and ``interrupt()``.

Every ``EnvGroup`` says which env it is calling (``EnvGroup.busy``, one int64 that may
live in shared memory) and counts its commands (``EnvGroup.tick``). Whoever waits for a
group compares these samples over time (``Stall``): an env whose call has not changed for
``step_timeout`` seconds is hung.

* The subproc parent and the Ray driver wait on a pipe or on Ray in short slices, so they
  check between slices, and stop a hung worker or actor from outside. That works whatever
  the env is doing.
* In dummy mode the env runs in the caller's own thread, which only another thread can
  watch: ``Watchdog``. When the caller is the main thread, the watchdog sends it SIGALRM
  and the handler raises inside the env's call, which ends a hang in Python code, in a
  sleep or in a wait on a lock or a socket. An env stuck in C code that never returns to
  Python cannot be stopped from inside the process (Ctrl-C cannot either): that is what
  the subproc mode is for.

``interrupt()`` (a first Ctrl-C) gives every call in progress, and every later one,
``INTERRUPT_GRACE`` seconds to return; one that takes longer is abandoned with
``StepInterrupted`` and everything is closed.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from typing import Any, Protocol

from expcli.errors import InvalidValueError

__all__ = [
    "INTERRUPT_GRACE",
    "Abandon",
    "Stall",
    "StepInterrupted",
    "Watchdog",
    "Watched",
    "check_timeout",
]

INTERRUPT_GRACE = 1.0  # seconds a call may still take once interrupt() was called
SLICE = 0.1  # seconds between checks of those who wait on pipes or on Ray


class StepInterrupted(KeyboardInterrupt):  # it is a KeyboardInterrupt
    """A call was abandoned after ``interrupt()``; the envs are closed."""


class Abandon(BaseException):  # not an error of the env's own
    """Raised inside an env's call that is given up (never caught by ``except Exception``)."""

    def __init__(self, message: str, interrupted: bool) -> None:
        super().__init__(message)
        self.interrupted = interrupted


def check_timeout(step_timeout: float | None) -> float | None:
    """``step_timeout`` as seconds, or None when off (None or 0).

    Raises:
        ValueError: Not a positive finite number.
    """
    if step_timeout is None:
        return None
    if (
        isinstance(step_timeout, bool)
        or not isinstance(step_timeout, (int, float))
        or not 0 <= step_timeout < float("inf")
    ):
        raise InvalidValueError(
            f"step_timeout must be a positive number of seconds, got {step_timeout!r}"
        )
    return float(step_timeout) or None


def hung_message(method: str, seconds: float) -> str:
    """What an ``EnvError`` says of an env that did not return."""
    return f"{method}() did not return within {seconds:g} s (step timeout): the env seems hung"


class Stall:
    """Tells when a sample of someone's progress has stayed the same for ``limit`` seconds."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.sample: object = None
        self.since = 0.0

    def stuck(self, sample: object, now: float) -> bool:
        """Record ``sample``; True when it is the same as for ``limit`` seconds."""
        if sample != self.sample:
            self.sample, self.since = sample, now
            return False
        return now - self.since >= self.limit


class Watched(Protocol):
    """What a watchdog reads of the group it watches (``env_group.EnvGroup`` is one).

    Attributes:
        tick: Commands run so far.
        busy: One int64: the global index of the env being called, -1 between calls.
        method: The method being called.
        thread: The id of the thread calling it.
    """

    tick: int
    busy: memoryview
    method: str
    thread: int


class Watchdog:
    """Watches an in-process group from a thread and gives up on a call that hangs.

    Args:
        group: The group watched (an ``EnvGroup``: its ``tick``, ``busy``, ``method`` and
            ``thread``).
        step_timeout: Seconds an env's call may take; None: only ``interrupt()``.

    The thread runs while there is something to watch for (a timeout, or an interrupt);
    it costs a wake-up every ``period`` seconds. Built in the main thread, a watchdog
    handles SIGALRM while it lives (if nothing else did), and gives it back when closed.
    """

    def __init__(self, group: Watched, step_timeout: float | None) -> None:
        self.group = group
        self.step_timeout = step_timeout
        self.period = min(0.25, step_timeout / 4) if step_timeout else 0.25
        self._interrupted_at: float | None = None
        self._target: tuple[Any, Abandon] | None = None
        self._fired: Any = None  # the call given up on (once each)
        self._told: Any = None  # the call said to be stuck (once each)
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        # Only the main thread can route SIGALRM here, and interrupt() may come from another.
        self._handler = _install_handler(self)
        if step_timeout:
            self._start()

    def interrupt(self) -> None:
        """Give up on a call that takes more than ``INTERRUPT_GRACE`` seconds from now on."""
        if self._interrupted_at is None:
            self._interrupted_at = time.monotonic()
        self._start()

    def close(self) -> None:
        """Stop the thread and give SIGALRM back; idempotent."""
        self._closing.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        if self._handler:
            self._handler = False
            _remove_handler(self)

    def raise_if_target(self) -> None:
        """Raise if the call given up on is still the one in progress.

        Runs in the stepping thread, from the SIGALRM handler.
        """
        target, self._target = self._target, None
        if target is not None and target[0] == self._sample():
            raise target[1]

    def _start(self) -> None:
        if self._thread is None and not self._closing.is_set():
            self._thread = threading.Thread(target=self._watch, name="expcli-watchdog", daemon=True)
            self._thread.start()

    def _sample(self) -> tuple[int, int]:
        return self.group.tick, int(self.group.busy[0])

    def _watch(self) -> None:
        hang = Stall(self.step_timeout) if self.step_timeout else None
        since_interrupt = Stall(INTERRUPT_GRACE)
        while not self._closing.wait(self.period):
            sample = self._sample()
            if sample[1] < 0:
                continue  # between calls
            now = time.monotonic()
            method = self.group.method
            if hang is not None and hang.stuck(sample, now):
                assert self.step_timeout is not None
                self._fire(sample, Abandon(hung_message(method, self.step_timeout), False))
                if now - hang.since >= 2 * hang.limit + 5:
                    self._tell_stuck(sample, method, now - hang.since)
            interrupted_at = self._interrupted_at
            if (
                interrupted_at is not None
                and since_interrupt.stuck(sample, now)
                and now - interrupted_at >= INTERRUPT_GRACE
            ):
                self._fire(sample, Abandon(f"{method}() interrupted", True))

    def _fire(self, sample: Any, error: Abandon) -> None:
        """Raise ``error`` in the stepping thread, if it is the main thread (once per call)."""
        thread = self.group.thread
        if (
            sample == self._fired
            or not self._handler
            or thread != threading.main_thread().ident  # only it runs signal handlers
            or signal.getsignal(signal.SIGALRM) is not _on_alarm
        ):
            return
        self._fired = sample
        self._target = (sample, error)
        with contextlib.suppress(OSError, ValueError):
            signal.pthread_kill(thread, signal.SIGALRM)

    def _tell_stuck(self, sample: Any, method: str, seconds: float) -> None:
        """Say once, on stderr, that an env cannot be given up on (stuck in C code)."""
        if self._told == sample:
            return
        self._told = sample
        with contextlib.suppress(Exception):
            sys.stderr.write(
                f"expcli: env {sample[1]} has been in {method}() for {seconds:.0f} s and cannot "
                "be interrupted in dummy mode (stuck in C code, or not stepped from the main "
                "thread); use the subproc mode for such envs, or kill this process\n"
            )
            sys.stderr.flush()


# ------------------------------------------------------------- SIGALRM, shared

_lock = threading.Lock()
_watchdogs: set[Watchdog] = set()


def _on_alarm(signum: int, frame: Any) -> None:
    del signum, frame
    for watchdog in list(_watchdogs):
        watchdog.raise_if_target()


def _install_handler(watchdog: Watchdog) -> bool:
    """Route SIGALRM to the watchdogs, unless someone else uses it (or not in the main thread)."""
    if (
        not hasattr(signal, "pthread_kill")
        or threading.current_thread() is not threading.main_thread()
    ):
        return False
    with _lock:
        if not _watchdogs:
            if signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None):
                return False
            signal.signal(signal.SIGALRM, _on_alarm)
        elif signal.getsignal(signal.SIGALRM) is not _on_alarm:
            return False
        _watchdogs.add(watchdog)
    return True


def _remove_handler(watchdog: Watchdog) -> None:
    with _lock:
        _watchdogs.discard(watchdog)
        if _watchdogs:
            return
        if threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGALRM) is _on_alarm
        ):
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
