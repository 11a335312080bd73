"""EnvPool's envs as expcli runs them: built from a task id, seeded, time-limited, described.

EnvPool (the ``envpool`` extra) steps batches of C++ envs in its own thread pool. Its envs
are its own implementations, not Gymnasium's: its Atari ids preprocess frames (84x84
grayscale, frame skip, frame stacks), and every env draws from its own generator. So
expcli runs EnvPool only when asked (``--mode envpool``), or where ``envpool_rules`` proves
an env to be the one ``gym.make`` builds. ``make_envpool_envs`` fixes what expcli needs:

* seeds: env ``i`` gets ``seed + i``, EnvPool's own convention, fixed when the pool is
  built (EnvPool ignores ``reset(seed=...)``); without a seed one is drawn and recorded;
* frame stacks: an env with a ``stack_num`` setting (Atari) runs with ``stack_num=1``
  unless ``--env-kwargs`` says otherwise; readers stack at sample time, so a frame is
  stored once instead of four times, and the metadata records the stack it stands for;
* the time limit: EnvPool reports an episode that ends on its last allowed step as
  truncated only, where Gymnasium's ``TimeLimit`` says terminated and truncated. expcli
  builds the pool one step longer and applies the limit itself (see ``EnvPoolStepper``).
"""

from __future__ import annotations

import contextlib
import difflib
import secrets
import warnings
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

from expcli.envs.env_ids import bare_id
from expcli.envs.modes import AsyncMode
from expcli.errors import ConfigError, EnvError, MissingDependencyError

__all__ = [
    "ENVPOOL_ASYNC_MODES",
    "ENVPOOL_MAX_SEED",
    "GYM_EQUIVALENT_IDS",
    "EnvPoolEnvs",
    "check_envpool_async",
    "check_envpool_id",
    "envpool_ids",
    "gym_equivalent",
    "import_envpool",
    "make_envpool_envs",
    "run_kwargs",
]

ENVPOOL_ASYNC_MODES = (AsyncMode.RESTART, AsyncMode.NONE, AsyncMode.IDLE)
ENVPOOL_MAX_SEED = 2**31  # EnvPool's seeds are int32
_NO_LIMIT = 2**31 - 1  # what EnvPool registers for envs without a time limit
# Settings expcli decides: the batch (--envs, stepped synchronously) and the seeds (--seed).
_OWN_KWARGS = {
    "num_envs": "--envs",
    "batch_size": "--envs (expcli steps every env each step)",
    "seed": "--seed (env i gets seed + i)",
    "env_seed": "--seed (env i gets seed + i)",
    "gym_reset_return_info": "nothing (expcli needs the reset infos)",
}


# EnvPool ids whose envs are, step for step, the envs ``gym.make(id)`` builds (with no
# --env-kwargs): the same spaces, and from the same state the same actions give the same
# observations, rewards and flags, bit for bit (tests/envpool/test_gym_equivalence.py
# proves it; the time limit is expcli's, as Gymnasium's). Only their random streams differ,
# so ``auto`` may run them through EnvPool when no --seed is given. Left out, measured:
# CartPole (its C++ multiplies in another order: float32 observations part after about 200
# steps of a balancing policy), Acrobot, Pendulum and MountainCarContinuous (other
# arithmetic; observations differ in their last bits within an episode), the stochastic toy
# texts (FrozenLake, Blackjack, CliffWalkingSlippery: other generators inside the step),
# Atari (preprocessed frames), Box2D and MuJoCo (states cannot be set to compare).
GYM_EQUIVALENT_IDS = frozenset({"MountainCar-v0", "CliffWalking-v1"})


def gym_equivalent(env_id: str, env_kwargs: Mapping[str, Any]) -> bool:
    """Whether EnvPool's ``env_id`` is the env ``gym.make(env_id)`` builds (no kwargs)."""
    return bare_id(env_id) in GYM_EQUIVALENT_IDS and not env_kwargs


def import_envpool() -> ModuleType:
    """The ``envpool`` module.

    Raises:
        MissingDependencyError: It is not installed (one line: what to install).
    """
    try:
        with _quiet():
            import envpool
    except ImportError as e:
        raise MissingDependencyError("envpool", "envpool", "EnvPool's envs (--mode envpool)") from e
    return envpool


def envpool_ids() -> list[str]:
    """Every task id EnvPool registers."""
    return list(import_envpool().list_all_envs())


def check_envpool_id(env_id: str) -> str:
    """``env_id`` if EnvPool has it, else ``ConfigError`` with the closest ids it has.

    Raises:
        ConfigError: EnvPool registers no such id.
        MissingDependencyError: EnvPool is not installed.
    """
    ids = envpool_ids()
    if env_id in ids:
        return env_id
    name = bare_id(env_id).rpartition("/")[2]  # "ale_py:ALE/Pong-v5" -> "Pong-v5"
    close = difflib.get_close_matches(name, ids, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ConfigError(
        f"EnvPool has no env {env_id!r}{hint} (`expcli envs --envpool` lists its ids)"
    )


def check_envpool_async(asynchronous: AsyncMode | str | None) -> None:
    """Refuse an ``--async`` mode that does not apply to EnvPool, in one line."""
    if (asynchronous or AsyncMode.NONE) not in ENVPOOL_ASYNC_MODES:
        raise ConfigError(
            "--mode envpool takes --async restart, none or idle, not "
            f"{str(asynchronous)!r}: EnvPool resets an ended env itself, so stepping past the "
            "end does not apply"
        )


def default_config(env_id: str) -> dict[str, Any]:
    """EnvPool's default settings of ``env_id`` (what ``envpool.make`` would use).

    Raises:
        EnvError: EnvPool cannot describe the env (e.g. a system library it needs is
            missing).
    """
    envpool = import_envpool()
    try:
        with _quiet():
            return dict(envpool.make_spec(env_id).config._asdict())
    except Exception as e:
        raise EnvError(f"EnvPool cannot make {env_id}: {_first_line(e)}") from e


class EnvPoolEnvs:
    """An EnvPool pool (Gymnasium API, stepped synchronously) and what expcli set for it.

    Attributes:
        pool: The EnvPool env (``envpool.make(task_id, "gymnasium", ...)``).
        config: Its settings, as EnvPool reports them.
        task_id: EnvPool's id (None for a pool built elsewhere).
        num_envs: Envs in the pool.
        seed: Env ``i``'s seed is ``seed + i`` (None: unknown, for a pool built elsewhere).
        seed_drawn: Whether expcli drew the seed (no ``--seed`` was given).
        asynchronous: ``"restart"``, ``None`` (``--async none``) or ``"idle"``.
        time_limit: The episode length at which expcli truncates (None: EnvPool's own).
        frame_stack: For envs with frame stacks: ``{"stack_num": intended,
            "stored": stored}``; readers stack ``stack_num`` frames when ``stored`` is 1.
    """

    def __init__(
        self,
        pool: Any,
        task_id: str | None = None,
        *,
        seed: int | None = None,
        seed_drawn: bool = False,
        asynchronous: AsyncMode | str | None = AsyncMode.RESTART,
        time_limit: int | None = None,
        frame_stack: dict[str, int] | None = None,
    ) -> None:
        check_envpool_async(asynchronous)
        config = pool.config
        if config["batch_size"] not in (0, config["num_envs"]):
            raise ConfigError(
                "expcli steps EnvPool synchronously: build the pool with batch_size equal to "
                f"num_envs ({config['num_envs']}), not {config['batch_size']}"
            )
        self.pool = pool
        self.config = config
        self.task_id = task_id
        self.num_envs = int(config["num_envs"])
        if seed is None and not list(config["env_seed"]) and task_id is None:
            seed = int(config["seed"])  # EnvPool's own convention is ours: env i, seed + i
        self.seed = seed
        self.seed_drawn = seed_drawn
        self.asynchronous = None if asynchronous in (None, AsyncMode.NONE) else asynchronous
        self.time_limit = time_limit
        self.frame_stack = frame_stack
        with _quiet():  # EnvPool builds its spaces when first asked
            self.observation_space = pool.observation_space
            self.action_space = pool.action_space

    @classmethod
    def of(cls, env: Any) -> EnvPoolEnvs | None:
        """``env`` itself, or a pool built with ``envpool.make`` wrapped; None for others.

        Raises:
            ConfigError: A pool of EnvPool's dm_env API (expcli steps its Gymnasium API).
        """
        if isinstance(env, EnvPoolEnvs):
            return env
        # EnvPool's pool classes are made at run time (module "abc"); their bases are its own.
        modules = {base.__module__ for base in type(env).__mro__}
        if not any(module.startswith("envpool.") for module in modules):
            return None
        if "envpool.python.gymnasium_envpool" not in modules:
            raise ConfigError(
                f"expcli steps EnvPool's Gymnasium API: build the pool with "
                f"envpool.make(task_id, 'gymnasium', ...), not a {type(env).__name__}"
            )
        return cls(env)

    def __len__(self) -> int:
        return self.num_envs

    def check_seed(self, seed: int | None) -> None:
        """Refuse a seed the pool was not built with: EnvPool fixes its seeds at ``make``.

        Raises:
            ConfigError: ``seed`` is not None and env ``i``'s seed is not ``seed + i``.
        """
        if seed is None or seed == self.seed:
            return
        if list(self.config["env_seed"]) == [seed + i for i in range(self.num_envs)]:
            return
        raise ConfigError(
            f"EnvPool fixes its seeds when the pool is built; this pool was not built with "
            f"seed {seed} (pass seed={seed} to envpool.make, or seed=None here)"
        )

    def metadata(self) -> dict[str, Any]:
        """What the dataset's metadata records: task id, EnvPool's version, full config."""
        envpool = import_envpool()
        config = {key: _json_value(value) for key, value in self.config.items()}
        out: dict[str, Any] = {
            "task_id": self.task_id,
            "version": getattr(envpool, "__version__", None),
            "config": config,
            "seed": self.seed,
            "seed_drawn": self.seed_drawn,
        }
        if self.time_limit is not None:
            out["time_limit"] = self.time_limit
            out["time_limit_note"] = (
                "expcli truncates at time_limit; the pool runs one step longer so that an "
                "episode ending on its last step is reported terminated too"
            )
        if self.frame_stack is not None:
            out["frame_stack"] = dict(self.frame_stack)
        return out

    def close(self) -> None:
        """Close the pool (idempotent)."""
        pool, self.pool = self.pool, None
        if pool is not None:
            with _quiet():
                pool.close()


def make_envpool_envs(
    env_id: str,
    num_envs: int,
    *,
    seed: int | None = None,
    asynchronous: AsyncMode | str | None = AsyncMode.RESTART,
    env_kwargs: Mapping[str, Any] | None = None,
) -> EnvPoolEnvs:
    """``num_envs`` EnvPool envs of ``env_id``, as ``--mode envpool`` runs them.

    Args:
        env_id: EnvPool's task id (``expcli envs --envpool`` lists them).
        num_envs: Envs in the pool.
        seed: Env ``i`` is seeded with ``seed + i``; None draws a seed (recorded).
        asynchronous: ``"restart"``, ``"none"``/None or ``"idle"`` (see ``EnvPoolStepper``).
        env_kwargs: Settings for ``envpool.make`` (``stack_num``, ``episodic_life``,
            ``max_episode_steps``, ...); the batch and the seeds are expcli's.

    Raises:
        ConfigError: An unknown id, a seed out of EnvPool's range, a setting expcli owns or
            one EnvPool does not take, an ``--async`` mode that does not apply, or spaces
            expcli cannot store yet.
        EnvError: EnvPool failed to build the envs.
        MissingDependencyError: EnvPool is not installed.
    """
    check_envpool_async(asynchronous)
    check_envpool_id(env_id)
    kwargs = dict(env_kwargs or {})
    for key, source in _OWN_KWARGS.items():
        if key in kwargs:
            raise ConfigError(f"--env-kwargs: {key!r} is set by {source}, not --env-kwargs")
    seed_drawn = seed is None
    if seed is None:
        seed = secrets.randbelow(ENVPOOL_MAX_SEED - num_envs)
    elif not 0 <= seed <= ENVPOOL_MAX_SEED - num_envs:
        raise ConfigError(
            f"--seed must be from 0 to {ENVPOOL_MAX_SEED - num_envs:,} with --mode envpool "
            f"(EnvPool's seeds are 32-bit and env i gets seed + i), got {seed:,}"
        )
    kwargs, time_limit, frame_stack = run_kwargs(env_id, kwargs)
    envpool = import_envpool()
    try:
        with _quiet():
            pool = envpool.make(env_id, "gymnasium", num_envs=num_envs, seed=seed, **kwargs)
    except (TypeError, ValueError, AssertionError) as e:
        raise ConfigError(f"--env-kwargs for envpool.make({env_id!r}): {_first_line(e)}") from e
    except Exception as e:
        raise EnvError(f"EnvPool could not build {env_id}: {_first_line(e)}") from e
    envs = EnvPoolEnvs(
        pool,
        env_id,
        seed=seed,
        seed_drawn=seed_drawn,
        asynchronous=asynchronous,
        time_limit=time_limit,
        frame_stack=frame_stack,
    )
    try:
        _check_storable(envs)
    except BaseException:
        envs.close()
        raise
    return envs


def run_kwargs(
    env_id: str, env_kwargs: Mapping[str, Any]
) -> tuple[dict[str, Any], int | None, dict[str, int] | None]:
    """What expcli passes to ``envpool.make`` for ``env_kwargs``, its time limit, its stack.

    Envs with frame stacks get ``stack_num=1`` unless asked otherwise; a time limit is
    applied by expcli (the pool runs one step longer).

    Returns:
        The kwargs, the time limit (None: none), and ``{"stack_num", "stored"}`` for envs
        with frame stacks (else None).
    """
    kwargs = dict(env_kwargs)
    defaults = default_config(env_id)
    frame_stack = None
    if "stack_num" in defaults:
        stored = int(kwargs.setdefault("stack_num", 1))
        intended = stored if stored > 1 else int(defaults["stack_num"])
        frame_stack = {"stack_num": intended, "stored": stored}
    limit = kwargs.get("max_episode_steps", defaults.get("max_episode_steps"))
    time_limit = None
    if isinstance(limit, int) and not isinstance(limit, bool) and 0 < limit < _NO_LIMIT:
        time_limit = limit
        kwargs["max_episode_steps"] = limit + 1
    return kwargs, time_limit, frame_stack


def _check_storable(envs: EnvPoolEnvs) -> None:
    for label, space in (("observation", envs.observation_space), ("action", envs.action_space)):
        kind = type(space).__name__
        if kind not in ("Box", "Discrete", "MultiDiscrete", "MultiBinary"):
            raise ConfigError(
                f"{envs.task_id}: EnvPool gives a {kind} {label} space; --mode envpool stores "
                "Box, Discrete, MultiDiscrete and MultiBinary spaces"
            )


def _json_value(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """EnvPool's spaces warn (float64 bounds cast to float32): not the user's concern."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
