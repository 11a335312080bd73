"""A rollout actor's body: a slice of the envs and its own copy of the policy, stepped in chunks.

Each chunk is ``k`` steps of the actor's envs, returned as transition columns
``{tensor name: (k, slice envs, ...)}`` of numpy arrays, which Ray hands to the driver
through the object store without copying. The actor's envs are global envs ``lo .. hi``:
env ``lo + j`` is reset first with ``seed + lo + j`` and the random policy draws each
env's actions from its own stream (``random_policy``), so the data does not depend on
how the envs are split among actors. Failures go back as values (``RemoteError``), so
that the driver can tell them from a dead actor. Ray is not imported here (the class is
made an actor by the driver).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ConfigError, EnvError

__all__ = ["RemoteError", "RolloutActor", "SliceSpec"]


@dataclass(frozen=True)
class SliceSpec:
    """What one actor builds: envs ``lo .. hi - 1`` of ``env_id`` and the policy.

    ``policy_file``: (file name, bytes) of a policy file (TorchScript, export archive or
    ``file.py``), written into the actor's temporary folder, so that remote nodes need not
    share the driver's files. ``policy_seed``: the random policy's streams (the run's seed,
    or the driver's entropy without one); ``seed``: the envs' first resets (None: unseeded).
    """

    env_id: str
    env_kwargs: dict[str, Any]
    wrappers: tuple[str, ...]
    lo: int
    hi: int
    subproc: bool
    workers: int | None
    step_timeout: float | None
    seed: int | None
    policy: str
    policy_seed: int
    rewards_dtype: str
    policy_file: tuple[str, bytes] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class RemoteError:
    """An error raised in the actor, as plain data (``kind``: ``EnvError`` or ``ConfigError``)."""

    kind: str
    message: str
    index: int | None = None
    traceback: str | None = None

    def to_error(self) -> Exception:
        """The exception this stands for."""
        if self.kind == "ConfigError":
            return ConfigError(self.message)
        return EnvError(self.message, index=self.index, remote_traceback=self.traceback)


class RolloutActor:
    """Envs ``spec.lo ..`` in a dummy (or subproc) ``ParallelEnv``, a policy, a stepper."""

    def __init__(self, spec: SliceSpec) -> None:
        self.spec = spec
        self.env: Any = None
        self.failure: RemoteError | None = None
        self._folder: Any = None
        try:
            self._build()
        except (EnvError, ConfigError) as e:
            self.failure = self._as_remote_error(e)

    def _build(self) -> None:
        from expcli.collect.policies import make_policy
        from expcli.collect.random_policy import RandomPolicy
        from expcli.collect.reward_dtypes import RewardsNote
        from expcli.collect.spaces import layout_of
        from expcli.collect.steppers import make_stepper
        from expcli.envs import ParallelEnv

        s = self.spec
        n = s.hi - s.lo
        self.env = ParallelEnv.from_id(
            s.env_id,
            n,
            para_mode="subproc" if s.subproc else "dummy",
            asynchronous="restart",
            num_cpus=s.workers,
            step_timeout=s.step_timeout,
            wrappers=s.wrappers,
            **s.env_kwargs,
        )
        self.stepper = make_stepper(self.env)
        space = self.stepper.action_space
        if s.policy == "random":
            self.policy: Any = RandomPolicy(space, n, s.policy_seed, first_env=s.lo)
        else:
            self.policy = make_policy(
                self._policy_spec(), self.stepper.observation_space, space, n, s.seed
            )
        self.checked = s.policy == "random"
        self.obs_layout = layout_of(self.stepper.observation_space, "observations")
        self.act_layout = layout_of(space, "actions")
        self.rewards_note = RewardsNote(s.rewards_dtype)
        self.num_envs = n
        self.obs: Any = None
        self.obs_rows: dict[str, np.ndarray] = {}

    def _policy_spec(self) -> str:
        """The policy spec, pointing at the shipped file when there is one."""
        s = self.spec
        if s.policy_file is None:
            return s.policy
        name, data = s.policy_file
        self._folder = tempfile.TemporaryDirectory(prefix="expcli-policy-")
        path = Path(self._folder.name) / name
        path.write_bytes(data)
        callable_name = s.policy.rsplit(":", 1)[1] if name.endswith(".py") else None
        return f"{path}:{callable_name}" if callable_name else str(path)

    def _as_remote_error(self, error: Exception) -> RemoteError:
        if isinstance(error, ConfigError):
            return RemoteError("ConfigError", str(error))
        assert isinstance(error, EnvError)
        index = None if error.index is None else error.index + self.spec.lo
        return RemoteError("EnvError", error.detail, index, error.remote_traceback)

    def ready(self) -> dict[str, Any] | RemoteError:
        """The spaces, the node and the process, once the envs are built."""
        if self.failure is not None:
            return self.failure
        node = None
        try:
            import ray

            node = ray.get_runtime_context().get_node_id()
        except Exception:  # not in a Ray worker (tests build the body directly)
            pass
        return {
            "observation_space": self.stepper.observation_space,
            "action_space": self.stepper.action_space,
            "node": node,
            "pid": os.getpid(),
        }

    def chunk(self, steps: int) -> dict[str, Any] | RemoteError:
        """Step ``steps`` times; the columns, env steps, seconds and rewards narrowed."""
        if self.failure is not None:
            return self.failure
        try:
            return self._chunk(steps)
        except (EnvError, ConfigError) as e:
            self.failure = self._as_remote_error(e)
            return self.failure

    def _chunk(self, steps: int) -> dict[str, Any]:
        from expcli.collect.action_checks import check_actions
        from expcli.collect.step_values import step_values

        n, layout = self.num_envs, self.obs_layout
        if self.obs is None:
            seed = None if self.spec.seed is None else self.spec.seed + self.spec.lo
            self.obs = self.stepper.reset(seed)
            self.obs_rows = layout.rows(self.obs, n)
        changed_before = self.rewards_note.changed
        columns: dict[str, np.ndarray] = {}
        start = time.perf_counter()
        for t in range(steps):
            seen = layout.batched(self.obs_rows) if layout.composite else self.obs
            actions = self.policy(seen)
            if not self.checked:
                actions = check_actions(actions, self.stepper.action_space, n, self.spec.policy)
                self.checked = True
            outcome = self.stepper.step(actions)
            final_rows = layout.rows(outcome.final_obs, n)
            values = step_values(
                self.obs_rows, final_rows, self.act_layout, actions, outcome, self.rewards_note, n
            )
            if not columns:
                columns = {name: np.empty((steps, *v.shape), v.dtype) for name, v in values.items()}
            for name, value in values.items():
                columns[name][t] = value
            self.obs = outcome.next_obs
            if outcome.next_obs is outcome.final_obs:
                self.obs_rows = final_rows
            else:
                self.obs_rows = layout.rows(outcome.next_obs, n)
        return {
            "columns": columns,
            "env_steps": steps * n,
            "seconds": time.perf_counter() - start,
            "rewards_changed": self.rewards_note.changed - changed_before,
            "rewards_env_dtype": self.rewards_note.env_dtype,
        }

    def close(self) -> None:
        """Close the envs (and remove a shipped policy file)."""
        env, self.env = self.env, None
        if env is not None:
            env.close()
        if self._folder is not None:
            self._folder.cleanup()
