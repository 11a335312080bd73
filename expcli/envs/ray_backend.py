"""The ray and ray-subproc backends: a Ray actor per contiguous slice of the envs.

Each actor hosts its slice the way the other backends do: a ``DummyBackend`` (ray mode)
or a ``SubprocBackend`` (ray-subproc: several machines times several cores). The driver
sends one call per actor per command and merges the replies in the order of the ids.
Env failures come back from the actors as values and are raised here as ``EnvError``; a
dead actor is reported the same way, or replaced with ``restart_on_error``.

Each actor reserves a CPU, or its share of the free CPUs when fewer are free, so that
several backends on one Ray never wait for each other.

An actor gives up on a hung env itself (its backend has the step timeout); the driver
waits in slices, gives up after ``interrupt()``, and kills an actor that does not answer
within the step timeout times its envs, plus ``_HUNG_MARGIN`` seconds (an env stuck in C
code, which its dummy backend cannot interrupt).

Ray is imported lazily (the ``ray`` extra). The backend starts a local Ray when none is
running and no cluster address is given, and shuts it down when its last user closes; a
Ray the user started (``ray.init``) is used as is and left running. On a cluster, the
nodes need expcli and the envs' packages installed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from expcli.envs._batching import scatter, take
from expcli.envs.backend import StepBatch
from expcli.envs.env_group import Slots
from expcli.envs.ray_actor import ActorHost, Factory, Failure
from expcli.envs.ray_session import connect, disconnect
from expcli.envs.watchdog import INTERRUPT_GRACE, SLICE, StepInterrupted
from expcli.errors import EnvError

__all__ = ["RayBackend", "kill_actor"]

ArgsFor = Callable[[np.ndarray], tuple[Any, ...]]  # an actor's arguments, from its positions

_START_TIMEOUT = 300.0  # seconds for the actors to be placed and to build their envs
_CLOSE_TIMEOUT = 5.0  # seconds for the actors to close their envs before being killed
_HUNG_MARGIN = 10.0  # seconds past what an actor's own step timeout would take


class RayBackend:
    """Envs spread over Ray actors, each hosting a contiguous slice.

    Args:
        factories: One picklable zero-argument env factory per env.
        num_cpus: ray: actors (default: the cluster's CPUs). ray-subproc: worker
            processes in all (default: every core of each actor's node). Also the CPUs
            of a local Ray this backend starts.
        num_gpus: GPUs reserved for the actors, shared among them.
        no_warning: Silence env warnings.
        restart_on_error: Rebuild failing envs, and replace dead actors, in ``step``.
        address: Ray cluster to join when Ray is not initialized (default: ``RAY_ADDRESS``,
            else a local Ray).
        subproc: Run a ``SubprocBackend`` in each actor (ray-subproc): one actor per
            node by default.
        num_actors: Overrides the number of actors.
        step_timeout: Seconds an env's call may take before it is reported hung.

    Raises:
        MissingDependencyError: Ray is not installed.
        EnvError: Ray could not start, or an env could not be built.
    """

    def __init__(
        self,
        factories: Sequence[Factory],
        num_cpus: int | None = None,
        num_gpus: int | float = 0,
        no_warning: bool = True,
        restart_on_error: bool = False,
        address: str | None = None,
        subproc: bool = False,
        num_actors: int | None = None,
        step_timeout: float | None = None,
    ) -> None:
        self._ray, self._counted = connect(address, num_cpus, num_gpus)
        self._closed = False
        self.step_timeout = step_timeout
        self._interrupted_at: float | None = None
        self._busy: set[int] = set()  # actors with a call not answered yet
        self._base_restarts = 0  # envs of replaced actors, and the restarts those had made
        self.actors: list[Any] = []
        self.factories = list(factories)
        self.num_envs = len(self.factories)
        self.restart_on_error, self.no_warning, self.subproc = restart_on_error, no_warning, subproc
        try:
            self._plan(num_cpus, num_gpus, num_actors)
            self.actors = [self._spawn(a) for a in range(len(self._bounds) - 1)]
            refs = {a: actor.ready.remote() for a, actor in enumerate(self.actors)}
            replies, _ = self._collect("make", refs, deadline=time.monotonic() + _START_TIMEOUT)
        except BaseException:
            self.close()
            raise
        self.observation_space, self.action_space = replies[0]

    def _plan(self, num_cpus: int | None, num_gpus: int | float, num_actors: int | None) -> None:
        """Choose the actors, their slices and what each reserves."""
        ray = self._ray
        total = max(1.0, float(ray.cluster_resources().get("CPU", 1.0)))
        free = float(ray.available_resources().get("CPU", 0.0))
        if num_actors is None and self.subproc:
            nodes = sum(1 for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU"))
            num_actors = min(max(1, nodes), num_cpus or nodes or 1)
        elif num_actors is None:
            num_actors = num_cpus or int(total)
        count = max(1, min(num_actors, self.num_envs))
        self._bounds = np.linspace(0, self.num_envs, count + 1).round().astype(int)
        self._workers = -(-num_cpus // count) if self.subproc and num_cpus else None
        self._options = {
            # never more than is free: two backends on one Ray must not wait for each other
            "num_cpus": min(float(self._workers or 1), free / count),
            "num_gpus": num_gpus / count if num_gpus else 0,
            "scheduling_strategy": "SPREAD",
            "max_restarts": 0,
        }
        self._host = ray.remote(ActorHost)
        self._restarts = [0] * count

    def _spawn(self, a: int) -> Any:
        lo, hi = int(self._bounds[a]), int(self._bounds[a + 1])
        args = (
            self.subproc,
            self._workers,
            self.restart_on_error,
            self.no_warning,
            self.step_timeout,
        )
        return self._host.options(**self._options).remote(self.factories[lo:hi], lo, *args)

    @property
    def restarts(self) -> int:
        """Envs rebuilt after an error so far (each env of a replaced actor counts)."""
        return self._base_restarts + sum(self._restarts)

    # ------------------------------------------------------------ commands

    def step(
        self, ids: np.ndarray, actions: Sequence[Any] | np.ndarray, autoreset: bool
    ) -> StepBatch:
        """Step the envs ``ids``; see ``Backend.step``."""
        parts, replies, dead = self._run(
            "step", ids, lambda pos: (take(actions, pos), autoreset), revive=self.restart_on_error
        )
        for a, error in dead.items():
            replies[a] = self._replace(a, error, ids[parts[a]])
        slots = Slots.allocate(len(ids), self.observation_space)  # Ray's arrays are read-only
        merged = StepBatch(
            slots.obs, slots.rewards, slots.terminated, slots.truncated, [{} for _ in ids]
        )
        for a, pos in parts.items():
            batch = replies[a]
            for name in ("obs", "rewards", "terminated", "truncated", "infos"):
                scatter(getattr(merged, name), pos, getattr(batch, name))
            merged.restarted.extend(batch.restarted)
        return merged

    def reset(
        self, ids: np.ndarray, seeds: Sequence[int | None], options: dict[str, Any] | None
    ) -> tuple[np.ndarray | list[Any], list[dict[str, Any]]]:
        """Reset the envs ``ids``; see ``Backend.reset``."""
        parts, replies, _ = self._run("reset", ids, lambda pos: (take(seeds, pos), options))
        obs = Slots.allocate(len(ids), self.observation_space).obs
        infos: list[dict[str, Any]] = [{} for _ in ids]
        for a, pos in parts.items():
            scatter(obs, pos, replies[a][0])
            scatter(infos, pos, replies[a][1])
        return obs, infos

    def get_attr(self, ids: np.ndarray, key: str) -> list[Any]:
        """See ``Backend.get_attr``."""
        return self._ordered("get_attr", ids, lambda pos: (key,))

    def set_attr(self, ids: np.ndarray, key: str, values: Sequence[Any]) -> None:
        """See ``Backend.set_attr``."""
        self._run("set_attr", ids, lambda pos: (key, take(values, pos)))

    def call(self, ids: np.ndarray, method: str, kwargs: Sequence[dict[str, Any]]) -> list[Any]:
        """See ``Backend.call``."""
        return self._ordered("call", ids, lambda pos: (method, take(kwargs, pos)))

    def interrupt(self) -> None:
        """Give up on a call not answered within ``INTERRUPT_GRACE`` s from now on."""
        if self._interrupted_at is None:
            self._interrupted_at = time.monotonic()

    def close(self) -> None:
        """Close the envs, kill the actors (dead ones too) and release Ray; idempotent."""
        if self._closed:
            return
        self._closed = True
        ray, actors, self.actors = self._ray, self.actors, []
        # a dead one's close fails at once; a busy one would answer only after its call
        close_actors(ray, actors, skip=self._busy)
        if self._counted:
            disconnect(ray)

    # ------------------------------------------------------------- plumbing

    def _run(
        self, method: str, ids: np.ndarray, args: ArgsFor, revive: bool = False
    ) -> tuple[dict[int, np.ndarray], dict[int, Any], dict[int, EnvError]]:
        """Send ``method`` to each actor holding some of ``ids``, with ``args(positions)``.

        Returns:
            The positions in ``ids`` of each actor's envs, the replies, and the actors
            that died when ``revive`` (the others raise).
        """
        if self._closed:
            raise EnvError("the Ray backend is closed")
        ids = np.asarray(ids, dtype=np.int64)
        owners = np.searchsorted(self._bounds, ids, side="right") - 1
        parts = {int(a): np.flatnonzero(owners == a) for a in np.unique(owners)}
        refs = {
            a: self.actors[a].run.remote(method, ids[pos], *args(pos)) for a, pos in parts.items()
        }
        replies, dead = self._collect(method, refs, revive)
        return parts, replies, dead

    def _ordered(self, method: str, ids: np.ndarray, args: ArgsFor) -> list[Any]:
        parts, replies, _ = self._run(method, ids, args)
        results: list[Any] = [None] * len(ids)
        for a, pos in parts.items():
            scatter(results, pos, replies[a])
        return results

    def _collect(
        self, method: str, refs: dict[int, Any], revive: bool = False, deadline: float | None = None
    ) -> tuple[dict[int, Any], dict[int, EnvError]]:
        """Wait for the replies as they come; the first failure closes everything and raises.

        Returns:
            The values by actor, and (when ``revive``) the errors of actors that died.
        """
        exceptions = self._ray.exceptions
        pending = {ref: a for a, ref in refs.items()}
        self._busy.update(refs)
        replies: dict[int, Any] = {}
        dead: dict[int, EnvError] = {}
        started = time.monotonic()
        while pending:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                what = "was not ready in time (not enough free CPUs or GPUs in the cluster?)"
                raise self._fail(self._error(method, pending[next(iter(pending))], what))
            self._check_waiting(method, pending, started, now, revive, dead)
            ready, _ = self._ray.wait(list(pending), num_returns=1, timeout=SLICE)
            if not ready:
                continue
            a = pending.pop(ready[0])
            self._busy.discard(a)
            try:
                reply = self._ray.get(ready[0])
            except exceptions.RayActorError as e:
                dead[a] = self._error(method, a, "died", e)
                if not revive:
                    raise self._fail(dead[a]) from None
                continue
            except exceptions.RayError as e:
                raise self._fail(self._error(method, a, "failed", e)) from None
            if isinstance(reply, Failure):
                raise self._fail(reply.to_error()) from None
            replies[a], self._restarts[a] = reply
        return replies, dead

    def _check_waiting(
        self,
        method: str,
        pending: dict[Any, int],
        started: float,
        now: float,
        revive: bool,
        dead: dict[int, EnvError],
    ) -> None:
        """Between slices of a wait: give up after ``interrupt()``; stop actors that hang."""
        interrupted_at = self._interrupted_at
        if interrupted_at is not None and now - max(interrupted_at, started) >= INTERRUPT_GRACE:
            raise StepInterrupted(f"{method}() interrupted")
        if self.step_timeout is None or method in ("make", "restart"):
            return
        for ref, a in list(pending.items()):
            lo, hi = int(self._bounds[a]), int(self._bounds[a + 1])
            limit = self.step_timeout * (hi - lo) + _HUNG_MARGIN
            if now - started >= limit:
                del pending[ref]
                kill_actor(self._ray, self.actors[a])
                self._busy.discard(a)
                what = (
                    f"did not answer within {limit:g} s (step timeout {self.step_timeout:g} s "
                    "per env): an env seems hung; the actor was stopped"
                )
                dead[a] = self._error(method, a, what)
                if not revive:
                    raise self._fail(dead[a])

    def _error(self, method: str, a: int, what: str, cause: Exception | None = None) -> EnvError:
        lo, hi = int(self._bounds[a]), int(self._bounds[a + 1]) - 1
        return EnvError(
            f"{method}() failed: the Ray actor of envs {lo}..{hi} {what}",
            index=lo,
            remote_traceback=None if cause is None else str(cause),
        )

    def _fail(self, error: EnvError) -> EnvError:
        self.close()
        return error

    def _replace(self, a: int, error: EnvError, stepped: np.ndarray) -> StepBatch:
        """A new actor for a dead one's envs, reset; the stepped ones end truncated."""
        lo, hi = int(self._bounds[a]), int(self._bounds[a + 1])
        kill_actor(self._ray, self.actors[a])
        self._base_restarts += self._restarts[a] + (hi - lo)
        self.actors[a] = actor = self._spawn(a)
        deadline = time.monotonic() + _START_TIMEOUT
        self._collect("restart", {a: actor.ready.remote()}, deadline=deadline)
        everything = np.arange(lo, hi)
        replies, _ = self._collect(
            "restart", {a: actor.run.remote("reset", everything, [None] * (hi - lo), None)}
        )
        obs, reset_infos = replies[a]
        local = stepped - lo
        return StepBatch(
            take(obs, local),
            np.zeros(len(local)),
            np.zeros(len(local), bool),
            np.ones(len(local), bool),
            [{**reset_infos[i], "env_error": str(error), "reset": True} for i in local],
            [int(i) for i in stepped],
        )


def close_actors(ray: ModuleType, actors: list[Any], skip: Container[int] = ()) -> None:
    """Ask ``actors`` to close their envs, then kill every one of them for good.

    Those at positions in ``skip`` are not asked (a busy one would answer only after its
    call); the others get at most ``_CLOSE_TIMEOUT`` s.
    """
    if not (ray.is_initialized() and actors):
        return
    refs = [actor.close.remote() for a, actor in enumerate(actors) if a not in skip]
    ray.wait(refs, num_returns=len(refs), timeout=_CLOSE_TIMEOUT)
    for actor in actors:
        kill_actor(ray, actor)


def kill_actor(ray: ModuleType, actor: Any) -> None:
    """Kill a Ray actor for good; one already dead (or Ray shut down) is let be."""
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already dead, or Ray already shut down
        pass
