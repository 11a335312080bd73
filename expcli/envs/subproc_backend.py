"""The subproc backend: worker processes, each hosting a slice of the envs.

Actions, observations, rewards and done flags travel through shared memory (one
``RawArray`` per buffer, each worker viewing its own rows); the pipe carries one short
command per worker per step and the rare infos. Peers run one process per env, which
wastes cheap envs on small machines; here the default is one worker per core.
"""

from __future__ import annotations

import contextlib
import enum
import multiprocessing as mp
import os
import pickle
import select
import signal
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import gymnasium as gym
import numpy as np

from expcli.envs.backend import StepBatch, covers_all
from expcli.envs.dummy_backend import gather, take
from expcli.envs.env_group import EnvGroup, ErrorRecord, GroupError, Slots, fixed_shape
from expcli.errors import EnvError

__all__ = ["SubprocBackend"]

Factory = Callable[[], gym.Env[Any, Any]]

_CLOSE_TIMEOUT = 5.0
# Seconds a worker polls for its next command (yielding its core) before it blocks. A
# blocked process is slow to wake on a small virtual machine (0.5-1.5 ms: the idle vCPU
# halts), more than a slice of cheap envs takes to step; a parent that takes longer than
# this between steps is slow enough that the wake-up no longer matters.
_SPIN = 0.02
# Messages are bytes: one byte for the common step, else a tag and a pickle.
_STEP_ALL, _STEP_ALL_RESET, _PICKLED = b"s", b"S", b"P"


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
class _Shared:
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
        cls, ctx: Any, n: int, obs_space: gym.Space[Any], act_space: gym.Space[Any]
    ) -> _Shared:
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


class _Worker:
    """The parent's handle on one worker process: its slice, pipe and process."""

    def __init__(
        self,
        ctx: Any,
        index: int,
        start: int,
        factories: Sequence[Factory],
        shared: _Shared,
        restart_on_error: bool,
        no_warning: bool,
        cpu: int | None,
    ) -> None:
        self.index, self.start, self.stop = index, start, start + len(factories)
        self.label_offset = 0
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_worker_main,
            args=(child, list(factories), start, shared, restart_on_error, no_warning, cpu),
            name=f"expcli-env-worker-{index}",
            daemon=True,
        )
        self.process.start()
        child.close()

    def send(self, command: Command, payload: Any) -> None:
        self._send(_PICKLED + pickle.dumps((command, payload), pickle.HIGHEST_PROTOCOL), command)

    def send_step_all(self, autoreset: bool) -> None:
        """The common step, as one byte: every env of the slice, actions in shared memory."""
        self._send(_STEP_ALL_RESET if autoreset else _STEP_ALL, Command.STEP)

    def _send(self, message: bytes, command: Command) -> None:
        try:
            self.conn.send_bytes(message)
        except (BrokenPipeError, ConnectionResetError, OSError) as e:
            raise self.died(command) from e

    def receive(self, command: Command) -> Any:
        """The worker's answer; None for a step with nothing to report."""
        try:
            message = self.conn.recv_bytes()
        except (EOFError, ConnectionResetError, OSError) as e:
            raise self.died(command) from e
        if not message:
            return None
        ok, result = pickle.loads(message)  # our own worker's reply
        if not ok:
            raise result.to_error()
        return result

    def died(self, command: Command) -> EnvError:
        """The error for a worker that vanished, naming how (exit code or signal)."""
        self.process.join(timeout=1.0)
        code = self.process.exitcode
        if code is not None and code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        elif code is not None:
            how = f"exited with code {code}"
        else:
            how = "stopped answering"
        first, last = self.start + self.label_offset, self.stop - 1 + self.label_offset
        hint = ""
        if command == Command.START and code == 1:
            hint = (
                "; workers are started with 'spawn', which re-imports your main module: "
                "does the code that builds the ParallelEnv run under "
                "'if __name__ == \"__main__\":'?"
            )
        return EnvError(
            f"worker process {self.index} (envs {first}..{last}) {how} during "
            f"{command.name.lower()}{hint}",
            index=self.start,
        )

    def shutdown(self) -> None:
        if self.process.is_alive():
            try:
                self.conn.send_bytes(_PICKLED + pickle.dumps((Command.CLOSE, None)))
                if self.conn.poll(_CLOSE_TIMEOUT):
                    self.conn.recv_bytes()
            except (OSError, EOFError):
                pass
            self.process.join(timeout=_CLOSE_TIMEOUT)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        self.conn.close()


class SubprocBackend:
    """Envs spread over worker processes talking through shared memory.

    Args:
        factories: One zero-argument env factory per env (picklable; see ``factories.py``).
        num_workers: Worker processes; default one per core, at most one per env.
        restart_on_error: Rebuild failing envs (in the worker) or dead workers instead
            of raising.
        no_warning: Silence env warnings.
        label_offset: Added to env numbers in messages, when these envs are a slice of a
            larger set (ray-subproc); ids and ``EnvError.index`` stay local.
        pin: Pin worker ``i`` to the ``i``-th CPU this process may use (Linux). Waiting
            workers stay runnable (see ``Doorbell``), so the scheduler cannot tell busy
            from waiting and may stack two busy workers on one core; pinning keeps them
            apart. Off where several groups share a machine (ray-subproc).

    Raises:
        EnvError: An env could not be built, or a worker failed to start.
    """

    def __init__(
        self,
        factories: Sequence[Factory],
        num_workers: int | None = None,
        restart_on_error: bool = False,
        no_warning: bool = True,
        label_offset: int = 0,
        pin: bool = True,
    ) -> None:
        self.num_envs = len(factories)
        self.label_offset = label_offset
        self.factories = list(factories)
        self.restart_on_error, self.no_warning = restart_on_error, no_warning
        self.restarts = 0
        self._autoreset = False
        self._workers: list[_Worker] = []
        self._closed = False
        probe = EnvGroup(self.factories[:1], 0, None, False, no_warning) if factories else None
        try:
            assert probe is not None
            self.observation_space = probe.envs[0].observation_space
            self.action_space = probe.envs[0].action_space
        except GroupError as e:
            raise e.record.to_error() from None
        finally:
            if probe is not None:
                probe.close()
        cpus = usable_cpus()
        count = max(1, min(num_workers or len(cpus), self.num_envs))
        self._cpus: list[int | None] = (
            [cpus[i % len(cpus)] for i in range(count)] if pin else [None] * count
        )
        bounds = np.linspace(0, self.num_envs, count + 1).round().astype(int)
        self._ctx = mp.get_context("spawn")
        self._shared = _Shared.allocate(
            self._ctx, self.num_envs, self.observation_space, self.action_space
        )
        self._obs = self._shared.view("obs")
        self._actions = self._shared.view("actions")
        self._rewards, self._terminated, self._truncated = (
            _required(self._shared.view(name)) for name in ("rewards", "terminated", "truncated")
        )
        self._slices = list(zip(bounds[:-1], bounds[1:], strict=True))
        self._owner = np.repeat(np.arange(count), np.diff(bounds))
        self._obs_list: list[Any] = [None] * self.num_envs
        self._slots = Slots(
            self._obs if self._obs is not None else self._obs_list,
            self._rewards,
            self._terminated,
            self._truncated,
        )
        self._all = {
            w: (list(range(stop - start)), list(range(start, stop)))
            for w, (start, stop) in enumerate(self._slices)
        }
        try:
            for index in range(count):
                self._workers.append(self._start(index))
            for worker in self._workers:
                worker.receive(Command.START)
        except BaseException:
            self.close()
            raise

    def _start(self, index: int) -> _Worker:
        start, stop = self._slices[index]
        worker = _Worker(
            self._ctx,
            index,
            int(start),
            self.factories[start:stop],
            self._shared,
            self.restart_on_error,
            self.no_warning,
            self._cpus[index],
        )
        worker.label_offset = self.label_offset
        return worker

    # ------------------------------------------------------------ commands

    def step(
        self, ids: np.ndarray, actions: Sequence[Any] | np.ndarray, autoreset: bool
    ) -> StepBatch:
        """Step the envs ``ids``; see ``Backend.step``."""
        per_worker = self._split(ids)
        if self._actions is not None:
            shaped = np.asarray(actions).reshape(len(ids), *self._actions.shape[1:])
            if per_worker is self._all:
                self._actions[:] = shaped
            else:
                self._actions[ids] = shaped
            payloads: dict[int, Any] = {
                w: (local, autoreset, None) for w, (local, _) in per_worker.items()
            }
            if per_worker is self._all:
                self._autoreset = autoreset
                payloads = dict.fromkeys(payloads, _STEP_ALL)
        else:
            payloads = {
                w: (local, autoreset, [actions[p] for p in positions])
                for w, (local, positions) in per_worker.items()
            }
        replies, dead = self._broadcast(Command.STEP, payloads)
        infos: dict[int, dict[str, Any]] = {}
        restarted: list[int] = []
        for w, reply in replies.items():
            if reply is None:
                continue
            local_infos, local_restarted, obs = reply
            start = self._workers[w].start
            infos.update({start + i: info for i, info in local_infos.items()})
            restarted.extend(start + i for i in local_restarted)
            self.restarts += len(local_restarted)
            if obs is not None:
                for i, value in obs.items():
                    self._obs_list[start + i] = value
        for w, error in dead.items():
            restarted.extend(self._replace(w, error, per_worker[w][0], infos))
        return gather(self._slots, ids, infos, restarted)

    def reset(
        self, ids: np.ndarray, seeds: Sequence[int | None], options: dict[str, Any] | None
    ) -> tuple[np.ndarray | list[Any], list[dict[str, Any]]]:
        """Reset the envs ``ids``; see ``Backend.reset``."""
        per_worker = self._split(ids)
        payloads = {
            w: (local, [seeds[p] for p in pos], options) for w, (local, pos) in per_worker.items()
        }
        replies = self._command(Command.RESET, payloads)
        infos: list[dict[str, Any]] = [{} for _ in ids]
        for w, (local_infos, obs) in replies.items():
            for p, info in zip(per_worker[w][1], local_infos, strict=True):
                infos[p] = info
            if obs is not None:
                start = self._workers[w].start
                for i, value in obs.items():
                    self._obs_list[start + i] = value
        obs_all = self._obs if self._obs is not None else self._obs_list
        return take(obs_all, ids), infos

    def get_attr(self, ids: np.ndarray, key: str) -> list[Any]:
        """See ``Backend.get_attr``."""
        return self._ordered(ids, Command.GET_ATTR, lambda local, pos: (local, key))

    def set_attr(self, ids: np.ndarray, key: str, values: Sequence[Any]) -> None:
        """See ``Backend.set_attr``."""
        per_worker = self._split(ids)
        self._command(
            Command.SET_ATTR,
            {w: (local, key, [values[p] for p in pos]) for w, (local, pos) in per_worker.items()},
        )

    def call(self, ids: np.ndarray, method: str, kwargs: Sequence[dict[str, Any]]) -> list[Any]:
        """See ``Backend.call``."""
        return self._ordered(
            ids, Command.CALL, lambda local, pos: (local, method, [kwargs[p] for p in pos])
        )

    def close(self) -> None:
        """Stop every worker (politely, then by force) and release the pipes; idempotent."""
        if self._closed:
            return
        self._closed = True
        for worker in self._workers:
            worker.shutdown()
        self._workers = []

    # ------------------------------------------------------------- plumbing

    def _split(self, ids: np.ndarray) -> dict[int, tuple[list[int], list[int]]]:
        """For each worker involved: local ids, and their positions in ``ids``."""
        if covers_all(ids, self.num_envs):
            return self._all
        per_worker: dict[int, tuple[list[int], list[int]]] = {}
        for p, i in enumerate(ids.tolist()):
            w = int(self._owner[i])
            local, positions = per_worker.setdefault(w, ([], []))
            local.append(i - int(self._slices[w][0]))
            positions.append(p)
        return per_worker

    def _broadcast(
        self, command: Command, payloads: dict[int, Any]
    ) -> tuple[dict[int, Any], dict[int, EnvError]]:
        """Send then collect; errors of envs raise, dead workers are returned."""
        dead: dict[int, EnvError] = {}
        for w, payload in payloads.items():
            try:
                if payload is _STEP_ALL:
                    self._workers[w].send_step_all(self._autoreset)
                else:
                    self._workers[w].send(command, payload)
            except EnvError as e:
                dead[w] = e
        replies: dict[int, Any] = {}
        failure: EnvError | None = None
        for w in payloads:
            if w in dead:
                continue
            try:
                replies[w] = self._workers[w].receive(command)
            except EnvError as e:
                if self._workers[w].process.is_alive():
                    failure = failure or e  # an env raised: keep collecting, then raise
                else:
                    dead[w] = e
        if failure is not None:
            raise failure
        if dead and (command != Command.STEP or not self.restart_on_error):
            raise next(iter(dead.values()))
        return replies, dead

    def _command(self, command: Command, payloads: dict[int, Any]) -> dict[int, Any]:
        replies, _ = self._broadcast(command, payloads)
        return replies

    def _ordered(
        self, ids: np.ndarray, command: Command, payload: Callable[[list[int], list[int]], Any]
    ) -> list[Any]:
        per_worker = self._split(ids)
        replies = self._command(
            command, {w: payload(local, pos) for w, (local, pos) in per_worker.items()}
        )
        results: list[Any] = [None] * len(ids)
        for w, values in replies.items():
            for p, value in zip(per_worker[w][1], values, strict=True):
                results[p] = value
        return results

    def _replace(
        self, w: int, error: EnvError, stepped: list[int], infos: dict[int, dict[str, Any]]
    ) -> list[int]:
        """Start a new worker for a dead one's envs; their episodes end truncated."""
        old = self._workers[w]
        old.shutdown()
        self._workers[w] = new = self._start(w)
        new.receive(Command.START)
        local = list(range(new.stop - new.start))
        new.send(Command.RESET, (local, [None] * len(local), None))
        reset_infos, obs = new.receive(Command.START)
        if obs is not None:
            for i, value in obs.items():
                self._obs_list[new.start + i] = value
        self.restarts += len(local)
        for i in stepped:
            g = new.start + i
            self._rewards[g], self._terminated[g], self._truncated[g] = 0.0, False, True
            infos[g] = {**reset_infos[i], "env_error": str(error), "reset": True}
        return [new.start + i for i in stepped]


# ----------------------------------------------------------------- worker side


def _worker_main(
    conn: Connection,
    factories: list[Factory],
    offset: int,
    shared: _Shared,
    restart_on_error: bool,
    no_warning: bool,
    cpu: int | None,
) -> None:
    """Body of a worker process: build the envs, then serve commands until CLOSE or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if cpu is not None:
        with contextlib.suppress(OSError):  # a container may forbid it: run unpinned
            os.sched_setaffinity(0, {cpu})
    if no_warning:
        warnings.simplefilter("ignore")
    host: _Host | None = None
    try:
        try:
            host = _Host.build(factories, offset, shared, restart_on_error, no_warning=False)
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
                if message in (_STEP_ALL, _STEP_ALL_RESET):
                    result = host.step_all(message == _STEP_ALL_RESET)
                    conn.send_bytes(b"" if result is None else _reply(True, result))
                    continue
                command, payload = pickle.loads(message[1:])  # from our own parent
                if command == Command.CLOSE:
                    conn.send_bytes(_reply(True, None))
                    return
                conn.send_bytes(_reply(True, host.run(command, payload)))
            except GroupError as e:
                conn.send_bytes(_reply(False, e.record))
            except Exception as e:  # a bug of ours or an unpicklable result: report, go on
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
        shared: _Shared,
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
            _required(shared.view(name))[rows] for name in ("rewards", "terminated", "truncated")
        )
        slots = Slots(
            obs[rows] if obs is not None else [None] * len(factories),
            rewards,
            terminated,
            truncated,
        )
        group = EnvGroup(factories, offset, slots, restart_on_error, no_warning)
        return cls(group, actions[rows] if actions is not None else None)

    def step_all(self, autoreset: bool) -> Any:
        """Step every env with its shared action; None when there is nothing to report."""
        infos, restarted = self.group.step(self.everyone, _required(self.actions), autoreset)
        if not (infos or restarted or not self.obs_shared):
            return None
        return infos, restarted, self._observations(self.everyone)

    def run(self, command: Command, payload: Any) -> Any:
        """Any other command; see ``SubprocBackend`` for the payloads."""
        group = self.group
        if command == Command.STEP:
            local, autoreset, sent = payload
            actions = sent if sent is not None else _required(self.actions)[local]
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
        raise ValueError(f"unknown command {command!r}")

    def _observations(self, local: list[int]) -> dict[int, Any] | None:
        return None if self.obs_shared else {i: self.slots.obs[i] for i in local}


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
    """

    def __init__(self, conn: Connection) -> None:
        self._poll: Callable[[int], Any]
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(conn.fileno(), select.POLLIN)
            self._poll = poller.poll
        else:  # Windows
            self._poll = conn.poll

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


def _required(array: np.ndarray | None) -> np.ndarray:
    assert array is not None
    return array


def _reply(ok: bool, result: Any) -> bytes:
    return pickle.dumps((ok, result), pickle.HIGHEST_PROTOCOL)
