"""Replay oracle: step every stored transition of an ``expcli collect`` file again, bit for bit.

Written apart from expcli's collector on purpose: it uses gymnasium, numpy and expcli's
public ``load`` only, and follows the decided behaviour rather than the code:

- env column ``i`` is ``gym.make(env_id, **env_kwargs)`` with the recorded wrappers
  applied in order, reset first with ``seed + i`` and unseeded after every episode end;
- every column is stepped with its own stored actions, row after row; the row where an
  episode ends holds the true final observation in ``next_observations``, and the reset
  that follows is never a transition;
- ``--async restart`` and ``idle``: each column is its env's consecutive steps (an idle env
  stores nothing while it waits, so its column reads as ``restart``'s); ``none``: when one
  env ends, every other env of that row is cut (``truncated``) and all reset; ``continue``:
  an ended env steps on without a reset;
- Dict and Tuple spaces are one tensor per leaf (``observations/<key>``, nested
  ``observations/<k1>/<k2>``, Tuple ``observations/0``), each in its leaf's dtype and shape;
  a Discrete sample is int64 shaped ``(1,)``;
- rewards are compared with the env's reward cast to the stored dtype (float32 or float64).

Values are compared as bytes, so NaN payloads and -0.0 count. What the oracle cannot check
it says: ``CannotReplay`` for a file it cannot replay at all, ``ReplayReport.unchecked``
for what it leaves out of a replay it does. Beyond those, it does not check:

- that the actions are the policy's (random draws from the seed): it replays them as
  stored, checking only that each lies in the action space; byte-identical reruns are
  a separate test;
- runs without a seed, ``vector`` mode (its envs draw from their own generator), a
  memory that wrapped (its first transitions are gone) or a partial last row;
- the ``idle`` wait itself: it leaves no trace in the columns, so only a transition stored
  while waiting would show;
- infos, other tensors (``infos/*``, ...) and the metadata's space descriptions, beyond
  the leaf names, dtypes and shapes the env's spaces call for;
- envs that are not deterministic given their seed (all the envs tested here are).
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from expcli import load

__all__ = [
    "CannotReplay",
    "Leaf",
    "Mismatch",
    "ReplayReport",
    "assert_replays",
    "compare",
    "leaves",
    "replay",
]

STEP_FIELDS = ("rewards", "terminated", "truncated")
ASYNC_MODES = ("restart", "idle", "none", "continue")


class CannotReplay(Exception):
    """The file cannot be replayed by this oracle; the message says why."""


@dataclass(frozen=True)
class Mismatch:
    """A stored value that the replay does not give (``row``/``env`` None: the whole tensor)."""

    field: str
    detail: str
    row: int | None = None
    env: int | None = None

    def __str__(self) -> str:
        where = "" if self.row is None else f" at row {self.row}, env {self.env}"
        return f"{self.field}{where}: {self.detail}"


@dataclass
class ReplayReport:
    """What a replay compared and what it found (at most the first mismatch of each column)."""

    transitions: int = 0
    episodes: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


@dataclass(frozen=True)
class Leaf:
    """One stored tensor of a space: its name, where it sits in a sample, its layout."""

    name: str
    keys: tuple[str | int, ...]
    space: spaces.Space[Any]
    dtype: np.dtype[Any]
    shape: tuple[int, ...]


def replay(path: str | os.PathLike[str]) -> ReplayReport:
    """Replay every stored transition of ``path`` in fresh envs and compare bit for bit.

    Raises:
        CannotReplay: The file lacks what a replay needs (seed, env id) or was made in a
            way the oracle cannot repeat (``vector`` mode, a wrapped memory, a text leaf).
    """
    dataset = load(path)
    meta = dataset.metadata
    collector = meta.get("collector") or {}
    seed, asynchronous, rows = _replay_plan(dataset, meta, collector)
    report = ReplayReport()
    report.unchecked.append(
        "actions are replayed as stored; whether a policy drew them from the seed is not checked"
    )
    make = _env_maker(meta)
    with warnings.catch_warnings():
        # Third-party envs warn freely (deprecations, the passive checker); not our data.
        warnings.simplefilter("ignore")
        envs = [make() for _ in range(dataset.num_envs)]
        try:
            layout = _Layout.of(envs[0], dataset.tensors, report)
            if report.ok:
                _Replayer(envs, dataset.tensors, layout, asynchronous, report).run(seed, rows)
        finally:
            for env in envs:
                env.close()
    return report


def assert_replays(path: str | os.PathLike[str]) -> ReplayReport:
    """``replay`` that raises ``AssertionError`` naming the first mismatch (one line)."""
    report = replay(path)
    if not report.ok:
        more = len(report.mismatches) - 1
        tail = f" (and {more} more mismatch{'es' * (more > 1)})" if more else ""
        raise AssertionError(f"{report.mismatches[0]}{tail}")
    return report


def _replay_plan(
    dataset: Any, meta: dict[str, Any], collector: dict[str, Any]
) -> tuple[int, str, int]:
    """Seed, asynchronous mode and rows to replay; ``CannotReplay`` when there is none."""
    seed = meta.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise CannotReplay(f"no seed recorded ({seed!r}): the first resets cannot be repeated")
    mode = collector.get("mode")
    if mode == "vector":
        raise CannotReplay(
            "vector mode: Gymnasium's batched env draws from its own generator, not gym.make's"
        )
    asynchronous = collector.get("asynchronous", "restart")
    if asynchronous not in ASYNC_MODES:
        raise CannotReplay(f"unknown asynchronous mode {asynchronous!r}")
    state = dataset.state
    if state.env_index != 0:
        raise CannotReplay(f"a partial last row (env_index {state.env_index}) is not replayed")
    if state.filled and state.memory_index != 0:
        raise CannotReplay("the memory wrapped: its first transitions are gone")
    rows = dataset.memory_size if state.filled else state.memory_index
    stored = rows * dataset.num_envs
    steps = collector.get("steps")
    if isinstance(steps, int) and steps > stored:
        raise CannotReplay(
            f"the memory wrapped: the run stored {steps} transitions, the file holds {stored}"
        )
    return seed, asynchronous, rows


def _env_maker(meta: dict[str, Any]) -> Callable[[], gym.Env[Any, Any]]:
    """``gym.make`` of the recorded env id and kwargs, then the recorded wrappers."""
    env_id = meta.get("env_id")
    if not isinstance(env_id, str) or not env_id:
        raise CannotReplay("no env_id in the metadata")
    module, _, name = env_id.rpartition(":")
    if module:
        importlib.import_module(module)
    kwargs = meta.get("env_kwargs") or {}
    wrappers = [_callable(spec) for spec in _wrapper_specs(meta)]

    def make() -> gym.Env[Any, Any]:
        env = gym.make(name, **kwargs)
        for wrap in wrappers:
            env = wrap(env)
        return env

    return make


def _wrapper_specs(meta: dict[str, Any]) -> list[str]:
    """``MODULE:CALLABLE`` wrappers, as ``collect --wrapper`` records them (in order)."""
    specs = meta.get("wrappers")
    if specs is None:
        specs = (meta.get("collector") or {}).get("wrappers")
    if specs is None:
        return []
    if isinstance(specs, str):
        specs = [specs]
    # Each is a MODULE:CALLABLE string, or a record of one: {"spec": "MODULE:CALLABLE", ...}.
    specs = [s.get("spec") if isinstance(s, dict) else s for s in specs]
    if not all(isinstance(s, str) for s in specs):
        raise CannotReplay(f"wrappers recorded as {specs!r}; expected MODULE:CALLABLE strings")
    return list(specs)


def _callable(spec: str) -> Callable[[Any], Any]:
    module, _, name = spec.partition(":")
    if not module or not name:
        raise CannotReplay(f"wrapper {spec!r} is not MODULE:CALLABLE")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target  # type: ignore[no-any-return]


# ----------------------------------------------------------------- leaves of a space


def leaves(space: spaces.Space[Any], prefix: str) -> list[Leaf]:
    """The tensors that store samples of ``space`` under ``prefix``, as decided."""
    if isinstance(space, spaces.Dict):
        return [
            Leaf(f"{leaf.name}", (key, *leaf.keys), leaf.space, leaf.dtype, leaf.shape)
            for key, sub in space.spaces.items()
            for leaf in leaves(sub, f"{prefix}/{key}")
        ]
    if isinstance(space, spaces.Tuple):
        return [
            Leaf(leaf.name, (j, *leaf.keys), leaf.space, leaf.dtype, leaf.shape)
            for j, sub in enumerate(space.spaces)
            for leaf in leaves(sub, f"{prefix}/{j}")
        ]
    if isinstance(space, spaces.Discrete):
        return [Leaf(prefix, (), space, np.dtype(np.int64), (1,))]
    if isinstance(space, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)):
        shape = tuple(int(d) for d in space.shape) or (1,)
        return [Leaf(prefix, (), space, np.dtype(space.dtype), shape)]
    raise CannotReplay(
        f"{prefix}: a {type(space).__name__} leaf has no numeric tensor; the oracle "
        "replays Box, Discrete, MultiBinary and MultiDiscrete leaves only"
    )


def encode(leaf: Leaf, sample: Any) -> np.ndarray:
    """The stored value of one sample's leaf: its space's dtype and the stored shape."""
    value = sample
    for key in leaf.keys:
        value = value[key]
    if isinstance(leaf.space, spaces.Discrete):
        return np.array([int(value)], dtype=np.int64)
    return np.asarray(value).astype(leaf.dtype, copy=False).reshape(leaf.shape)


def decode(space: spaces.Space[Any], stored: dict[str, np.ndarray], prefix: str) -> Any:
    """An action for ``env.step`` from its stored leaves (the inverse of ``encode``)."""
    if isinstance(space, spaces.Dict):
        return {k: decode(s, stored, f"{prefix}/{k}") for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(decode(s, stored, f"{prefix}/{j}") for j, s in enumerate(space.spaces))
    value = stored[prefix]
    if isinstance(space, spaces.Discrete):
        return np.int64(value[0])
    return np.array(value, dtype=space.dtype).reshape(space.shape)


def compare(stored: np.ndarray, expected: np.ndarray) -> str | None:
    """None when the two values have the same bytes; else what differs, in a few words."""
    if stored.dtype != expected.dtype or stored.shape != expected.shape:
        return (
            f"stored {stored.dtype}{list(stored.shape)}, replay gives "
            f"{expected.dtype}{list(expected.shape)}"
        )
    a = np.ascontiguousarray(stored)
    b = np.ascontiguousarray(expected)
    if a.tobytes() == b.tobytes():
        return None
    width = a.dtype.itemsize
    differs = (
        a.reshape(-1).view(np.uint8).reshape(-1, width)
        != b.reshape(-1).view(np.uint8).reshape(-1, width)
    ).any(axis=1)
    where = np.flatnonzero(differs)
    first = int(where[0])
    index = np.unravel_index(first, a.shape) if a.shape else ()
    at = f"[{', '.join(str(int(k)) for k in index)}]" if a.size > 1 else ""
    count = f" ({where.size} of {a.size} values differ)" if a.size > 1 else ""
    return f"stored{at} {a.reshape(-1)[first]!r} != replayed {b.reshape(-1)[first]!r}{count}"


# ----------------------------------------------------------------- the file's layout


@dataclass(frozen=True)
class _Layout:
    observations: list[Leaf]
    actions: list[Leaf]
    action_space: spaces.Space[Any]
    reward_dtype: np.dtype[Any]

    @classmethod
    def of(
        cls, env: gym.Env[Any, Any], tensors: dict[str, np.ndarray], report: ReplayReport
    ) -> _Layout:
        """The leaves the env's spaces call for, checked against the file's tensors."""
        obs = leaves(env.observation_space, "observations")
        next_obs = leaves(env.observation_space, "next_observations")
        actions = leaves(env.action_space, "actions")
        for group, expected in (
            ("observations", obs),
            ("next_observations", next_obs),
            ("actions", actions),
        ):
            _check_names(group, {leaf.name for leaf in expected}, tensors, report)
            for leaf in expected:
                stored = tensors.get(leaf.name)
                if stored is not None and (
                    stored.dtype != leaf.dtype or tuple(stored.shape[2:]) != leaf.shape
                ):
                    report.mismatches.append(
                        Mismatch(
                            leaf.name,
                            f"stored {stored.dtype}{list(stored.shape[2:])}, its "
                            f"{type(leaf.space).__name__} space gives "
                            f"{leaf.dtype}{list(leaf.shape)}",
                        )
                    )
        reward_dtype = np.dtype(np.float32)
        for name in STEP_FIELDS:
            stored = tensors.get(name)
            want = "float32 or float64" if name == "rewards" else "bool"
            if stored is None:
                report.mismatches.append(Mismatch(name, "no such tensor in the file"))
                continue
            good = (
                stored.dtype in (np.float32, np.float64)
                if name == "rewards"
                else stored.dtype == np.bool_
            )
            if not good or tuple(stored.shape[2:]) != (1,):
                found = f"{stored.dtype}{list(stored.shape[2:])}"
                report.mismatches.append(Mismatch(name, f"stored {found}, expected {want}[1]"))
            elif name == "rewards":
                reward_dtype = stored.dtype
        known = {leaf.name for leaf in (*obs, *next_obs, *actions)} | set(STEP_FIELDS)
        others = sorted(set(tensors) - known)
        if others:
            report.unchecked.append(f"tensors not replayed: {', '.join(others)}")
        return cls(obs, actions, env.action_space, reward_dtype)


def _check_names(
    group: str, expected: set[str], tensors: dict[str, np.ndarray], report: ReplayReport
) -> None:
    present = {n for n in tensors if n == group or n.startswith(group + "/")}
    missing = sorted(expected - present)
    extra = sorted(present - expected)
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(extra)}")
        report.mismatches.append(Mismatch(group, "; ".join(parts)))


# ----------------------------------------------------------------- stepping


class _Replayer:
    """Steps the fresh envs column by column through the stored rows."""

    def __init__(
        self,
        envs: list[gym.Env[Any, Any]],
        tensors: dict[str, np.ndarray],
        layout: _Layout,
        asynchronous: str,
        report: ReplayReport,
    ) -> None:
        self.envs = envs
        self.tensors = tensors
        self.layout = layout
        self.asynchronous = asynchronous
        self.report = report
        self.live = list(range(len(envs)))

    def run(self, seed: int, rows: int) -> None:
        current = [env.reset(seed=seed + i)[0] for i, env in enumerate(self.envs)]
        for t in range(rows):
            flags: dict[int, tuple[bool, bool]] = {}
            for i in list(self.live):
                if i not in self.live:
                    break
                outcome = self._step(t, i, current[i])
                if outcome is None:
                    self._drop(i)
                else:
                    current[i], flags[i] = outcome
            ended = self._check_flags(t, flags)
            if not self.live:
                return
            self.report.transitions += len(self.live)
            self.report.episodes += len(ended)
            if self.asynchronous in ("restart", "idle"):
                for i in ended:
                    current[i] = self.envs[i].reset()[0]
            elif self.asynchronous == "none" and ended:
                current = [env.reset()[0] for env in self.envs]

    def _drop(self, i: int) -> None:
        """Stop column ``i`` at its first mismatch; under ``none`` the columns are one."""
        self.live = [] if self.asynchronous == "none" else [k for k in self.live if k != i]

    def _step(self, t: int, i: int, obs: Any) -> tuple[Any, tuple[bool, bool]] | None:
        """Check row ``t`` of column ``i`` up to the reward; None after a mismatch."""
        layout = self.layout
        for leaf in layout.observations:
            if self._differs(leaf.name, t, i, encode(leaf, obs)):
                return None
        stored = {leaf.name: self.tensors[leaf.name][t, i] for leaf in layout.actions}
        action = decode(layout.action_space, stored, "actions")
        if not layout.action_space.contains(action):
            self._mismatch("actions", t, i, f"{action!r} is outside {layout.action_space}")
            return None
        next_obs, reward, terminated, truncated, _ = self.envs[i].step(action)
        for leaf in layout.observations:
            name = "next_" + leaf.name
            if self._differs(name, t, i, encode(leaf, next_obs)):
                return None
        if self._differs("rewards", t, i, np.array([reward], dtype=layout.reward_dtype)):
            return None
        return next_obs, (bool(terminated), bool(truncated))

    def _check_flags(self, t: int, flags: dict[int, tuple[bool, bool]]) -> list[int]:
        """Compare the row's terminated/truncated; the columns whose episode ended."""
        cut = self.asynchronous == "none" and any(a or b for a, b in flags.values())
        ended = []
        for i in list(self.live):
            if i not in self.live:
                continue
            terminated, truncated = flags[i]
            truncated = truncated or (cut and not terminated)
            if self._differs("terminated", t, i, np.array([terminated])) or self._differs(
                "truncated", t, i, np.array([truncated])
            ):
                self._drop(i)
                continue
            if terminated or truncated:
                ended.append(i)
        return ended

    def _differs(self, name: str, t: int, i: int, expected: np.ndarray) -> bool:
        problem = compare(self.tensors[name][t, i], expected)
        if problem is not None:
            self._mismatch(name, t, i, problem)
        return problem is not None

    def _mismatch(self, name: str, t: int, i: int, detail: str) -> None:
        self.report.mismatches.append(Mismatch(name, detail, t, i))
