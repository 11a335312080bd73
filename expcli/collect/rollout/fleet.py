"""The driver's side of the rollout actors: start them, ask for chunks, replace or kill them.

One actor per contiguous slice of the envs (``ray``: one per CPU of the cluster, or
``--num-cpus``; ``ray-subproc``: one per node, each stepping its slice in worker
processes), spread over the nodes. Chunk requests are plain Ray actor calls: an actor
answers them in the order sent, so two in flight keep it busy while the driver merges.
An actor that dies, or answers nothing within the chunk timeout, is killed and reported
(``ActorLost``); ``replace`` starts another on the same slice with a new, recorded seed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from expcli.collect.rollout.actor import RemoteError, RolloutActor, SliceSpec
from expcli.envs.ray_backend import close_actors, kill_actor
from expcli.envs.ray_session import connect, disconnect
from expcli.errors import EnvError

__all__ = ["ActorLost", "Request", "RolloutFleet", "replacement_seed"]

_START_TIMEOUT = 300.0  # seconds for the actors to be placed and to build their envs


class ActorLost(Exception):
    """An actor died or stopped answering; ``error`` says which and how."""

    def __init__(self, actor: int, error: EnvError) -> None:
        super().__init__(str(error))
        self.actor = actor
        self.error = error


@dataclass(eq=False)
class Request:
    """One chunk asked of one actor."""

    actor: int
    seq: int
    steps: int
    ref: Any
    sent: float


def replacement_seed(seed: int, lo: int, restart: int) -> int:
    """The seed of the ``restart``-th replacement of the actor whose slice starts at ``lo``."""
    state = np.random.SeedSequence(seed, spawn_key=(lo, restart + 1)).generate_state(1)
    return int(state[0])


class RolloutFleet:
    """Rollout actors over ``num_envs`` envs; see the module docstring.

    Args:
        base: The slice spec every actor gets (its ``lo``/``hi`` are set per actor).
        num_envs: Envs in all.
        subproc: ray-subproc (a worker group per actor, one actor per node).
        num_cpus: Actors (ray) or worker processes in all (ray-subproc).
        address: Ray cluster to join (default: ``RAY_ADDRESS``, else a local Ray).
        say: Prints a line for the user (that a local Ray is starting).

    Raises:
        EnvError: Ray could not start or join, or an actor could not build its envs.
        ConfigError: The policy could not be built in an actor.
    """

    def __init__(
        self,
        base: SliceSpec,
        num_envs: int,
        *,
        subproc: bool,
        num_cpus: int | None,
        address: str | None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self._ray, self._owned = connect(address, num_cpus, 0, say=say)
        self._closed = False
        self.actors: list[Any] = []
        self.num_envs = num_envs
        self.restarts: list[dict[str, Any]] = []
        try:
            self._plan(base, num_cpus, subproc)
            self.actors = [self._spawn(spec) for spec in self.specs]
            self.placement = self._wait_ready(range(len(self.actors)))
        except BaseException:
            self.close()
            raise
        first = self.placement[0]
        self.observation_space = first["observation_space"]
        self.action_space = first["action_space"]

    def _plan(self, base: SliceSpec, num_cpus: int | None, subproc: bool) -> None:
        ray = self._ray
        total = max(1, int(ray.cluster_resources().get("CPU", 1)))
        if subproc:
            nodes = sum(1 for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU"))
            count = max(1, min(nodes, num_cpus or nodes))
        else:
            count = num_cpus or total
        count = max(1, min(count, self.num_envs))
        bounds = np.linspace(0, self.num_envs, count + 1).round().astype(int)
        workers = -(-num_cpus // count) if subproc and num_cpus else None
        self.specs = [
            replace(
                base, lo=int(bounds[a]), hi=int(bounds[a + 1]), subproc=subproc, workers=workers
            )
            for a in range(count)
        ]
        free = float(ray.available_resources().get("CPU", 0.0))
        self._options = {
            "num_cpus": min(float(workers or 1), max(free, 0.01) / count),
            "scheduling_strategy": "SPREAD",
            "max_restarts": 0,
            "max_concurrency": 1,
        }
        self._actor_class = ray.remote(RolloutActor)

    def _spawn(self, spec: SliceSpec) -> Any:
        return self._actor_class.options(**self._options).remote(spec)

    def _wait_ready(self, which: Any) -> list[dict[str, Any]]:
        refs = {a: self.actors[a].ready.remote() for a in which}
        deadline = time.monotonic() + _START_TIMEOUT
        out: dict[int, dict[str, Any]] = {}
        for a, ref in refs.items():
            left = max(0.1, deadline - time.monotonic())
            try:
                reply = self._ray.get(ref, timeout=left)
            except self._ray.exceptions.GetTimeoutError:
                raise self.error(a, "was not ready in time (not enough free CPUs?)") from None
            except self._ray.exceptions.RayError as e:
                raise self.error(a, f"failed to start: {e}") from None
            if isinstance(reply, RemoteError):
                raise reply.to_error()
            out[a] = reply
        return [out[a] for a in sorted(out)]

    def error(self, a: int, what: str) -> EnvError:
        """The ``EnvError`` of actor ``a`` (its envs named)."""
        spec = self.specs[a]
        return EnvError(f"the Ray actor of envs {spec.lo}..{spec.hi - 1} {what}", index=spec.lo)

    def request(self, a: int, seq: int, steps: int) -> Request:
        """Ask actor ``a`` for a chunk of ``steps`` steps (answered after those sent before)."""
        ref = self.actors[a].chunk.remote(steps)
        return Request(a, seq, steps, ref, time.monotonic())

    def wait(self, requests: list[Request], timeout: float) -> list[Request]:
        """The requests whose answer is ready, waiting at most ``timeout`` seconds."""
        refs = [r.ref for r in requests]
        first, rest = self._ray.wait(refs, num_returns=1, timeout=timeout)
        if not first:
            return []
        more, _ = self._ray.wait(rest, num_returns=len(rest), timeout=0) if rest else ([], [])
        done = {ref.hex() for ref in (*first, *more)}
        return [r for r in requests if r.ref.hex() in done]

    def result(self, request: Request) -> dict[str, Any]:
        """The chunk of a ready request.

        Raises:
            ActorLost: The actor died.
            EnvError, ConfigError: An env or the policy failed in the actor.
        """
        try:
            reply = self._ray.get(request.ref)
        except self._ray.exceptions.RayActorError as e:
            raise ActorLost(request.actor, self.error(request.actor, f"died ({e})")) from None
        except self._ray.exceptions.RayError as e:
            raise ActorLost(request.actor, self.error(request.actor, f"failed ({e})")) from None
        if isinstance(reply, RemoteError):
            raise reply.to_error()
        return reply  # type: ignore[no-any-return]

    def kill(self, a: int) -> None:
        """Kill actor ``a`` (dead or hung: nothing is waited for)."""
        kill_actor(self._ray, self.actors[a])

    def replace(self, a: int, seed: int, row: int, error: EnvError) -> None:
        """A new actor on actor ``a``'s slice, its envs and policy seeded from ``seed``."""
        self.kill(a)
        spec = self.specs[a]
        new_seed = replacement_seed(seed, spec.lo, len(self.restarts))
        self.specs[a] = replace(spec, seed=new_seed, policy_seed=new_seed)
        self.actors[a] = self._spawn(self.specs[a])
        self.placement[a] = self._wait_ready([a])[0]
        self.restarts.append(
            {"envs": [spec.lo, spec.hi - 1], "row": row, "seed": new_seed, "error": str(error)}
        )

    def metadata(self) -> dict[str, Any]:
        """Where the actors ran and what was restarted, for the dataset's metadata."""
        return {
            "actors": [
                {"envs": [s.lo, s.hi - 1], "node": p.get("node"), "pid": p.get("pid")}
                for s, p in zip(self.specs, self.placement, strict=True)
            ],
            "restarts": list(self.restarts),
        }

    def close(self) -> None:
        """Close the envs, kill every actor and release Ray (idempotent)."""
        if self._closed:
            return
        self._closed = True
        ray, actors, self.actors = self._ray, self.actors, []
        close_actors(ray, actors)
        if self._owned:
            disconnect(ray)
