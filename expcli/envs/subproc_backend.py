"""The subproc backend: worker processes, each hosting a slice of the envs.

Actions, observations, rewards and done flags travel through shared memory (one
``RawArray`` per buffer, each worker viewing its own rows); the pipe carries one short
command per worker per step and the rare infos. Peers run one process per env, which
wastes cheap envs on small machines; here the default is one worker per usable CPU,
pinned to it. This module is the parent's side; ``subproc_worker`` is the workers'.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import signal
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from expcli.envs.backend import StepBatch, covers_all
from expcli.envs.dummy_backend import gather, take
from expcli.envs.env_group import EnvGroup, GroupError, Slots
from expcli.envs.subproc_worker import (
    PICKLED,
    STEP_ALL,
    STEP_ALL_RESET,
    Command,
    Factory,
    SharedBuffers,
    required,
    usable_cpus,
    worker_main,
)
from expcli.errors import EnvError

__all__ = ["SubprocBackend"]

_CLOSE_TIMEOUT = 5.0


class _Worker:
    """The parent's handle on one worker process: its slice, pipe and process."""

    def __init__(
        self,
        ctx: Any,
        index: int,
        start: int,
        factories: Sequence[Factory],
        shared: SharedBuffers,
        restart_on_error: bool,
        no_warning: bool,
        cpu: int | None,
    ) -> None:
        self.index, self.start, self.stop = index, start, start + len(factories)
        self.label_offset = 0
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=worker_main,
            args=(child, list(factories), start, shared, restart_on_error, no_warning, cpu),
            name=f"expcli-env-worker-{index}",
            daemon=True,
        )
        self.process.start()
        child.close()

    def send(self, command: Command, payload: Any) -> None:
        self._send(PICKLED + pickle.dumps((command, payload), pickle.HIGHEST_PROTOCOL), command)

    def send_step_all(self, autoreset: bool) -> None:
        """The common step, as one byte: every env of the slice, actions in shared memory."""
        self._send(STEP_ALL_RESET if autoreset else STEP_ALL, Command.STEP)

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
                self.conn.send_bytes(PICKLED + pickle.dumps((Command.CLOSE, None)))
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
        self._shared = SharedBuffers.allocate(
            self._ctx, self.num_envs, self.observation_space, self.action_space
        )
        self._obs = self._shared.view("obs")
        self._actions = self._shared.view("actions")
        self._rewards, self._terminated, self._truncated = (
            required(self._shared.view(name)) for name in ("rewards", "terminated", "truncated")
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
                payloads = dict.fromkeys(payloads, STEP_ALL)
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
                if payload is STEP_ALL:
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
