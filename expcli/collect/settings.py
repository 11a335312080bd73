"""What a collect run is asked to do: the settings, and reading them from a TOML file.

Every command-line option of ``expcli collect`` has a key of the same name in the config
file (dashes or underscores); the command line wins over the file.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from expcli.collect.engines import ENGINES, CollectMode
from expcli.envs.modes import AsyncMode
from expcli.errors import ConfigError, quoted
from expcli.spec import Compression, FramesForm, ImagesForm

__all__ = ["MAX_ENVS", "MAX_SEED", "CollectSettings", "choose", "read_config", "typed_value"]

_Choice = TypeVar("_Choice", bound=StrEnum)
# Envs of one run: far beyond what one machine steps usefully (Atari runs use 8 to 256),
# and low enough that a typo such as 100000000 is refused instead of filling the memory.
MAX_ENVS = 65_536
MAX_SEED = 2**64 - 1  # numpy and Gymnasium take any seed >= 0; 64 bits is what other tools take
STEP_TIMEOUT = 60.0  # seconds an env's step may take before it is reported hung
REWARD_DTYPES = ("float32", "float64")


@dataclass
class CollectSettings:
    """Options of one collect run (defaults are the command's)."""

    env_id: str = ""
    envs: int = 1
    steps: int | None = None
    episodes: int | None = None
    memory_size: int | None = None
    mode: CollectMode = CollectMode.AUTO
    force_mode: bool = False
    asynchronous: AsyncMode = AsyncMode.RESTART
    policy: str = "random"
    seed: int | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    ray_address: str | None = None
    num_cpus: int | None = None
    step_timeout: float | str | None = STEP_TIMEOUT
    chunk_steps: int | None = None  # rollout actors: steps per call (None: measured)
    chunk_timeout: float | str | None = None  # rollout actors: None: the step timeout
    restart_on_error: bool = False  # rollout actors: replace a lost actor
    infos: bool = False
    wrappers: list[str] = field(default_factory=list)
    rewards_dtype: str = "float32"
    output: Path | None = None
    compression: Compression | None = None  # None: the format's own (Parquet: zstd)
    overwrite: bool = False
    quiet: bool = False
    shard_size: str | int | None = None  # a folder output's shards: rows or bytes ("256MB")
    resuming: bool = False  # set by ``--resume``: the folder output exists and goes on
    spool: bool | None = None  # a file output through shards beside it; None: when large
    shard_format: str | None = None  # a folder output's shards (``shard_formats``); None: npz
    frames: FramesForm = FramesForm.ONCE  # how a file output stores next observations
    license: str | None = None  # a folder output's dataset card; None: ``other``
    images: ImagesForm = ImagesForm.PNG  # how a Parquet file output stores image-like frames

    @property
    def step_timeout_seconds(self) -> float | None:
        """``step_timeout`` in seconds; None: no limit (``0``, ``"none"`` or ``"off"``).

        Raises:
            ConfigError: Not a number of seconds.
        """
        return _seconds_or_none(self.step_timeout, "--step-timeout")

    def validate(self) -> CollectSettings:
        """Check every value; fill in the default step count.

        Raises:
            ConfigError: A value of the wrong type or out of range, naming its option.
        """
        if not self.env_id:
            raise ConfigError("no env id: give ENV_ID (e.g. CartPole-v1) or `env` in --config")
        for name in ("envs", "steps", "episodes", "memory_size", "num_cpus", "chunk_steps"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{_flag(name)} must be a positive integer, got {value!r}")
        if self.envs > MAX_ENVS:
            raise ConfigError(
                f"--envs must be at most {MAX_ENVS:,}, got {self.envs:,}: each env is a live "
                "Gymnasium env in this machine's memory"
            )
        if self.steps is not None and self.episodes is not None:
            raise ConfigError("give --steps or --episodes, not both")
        if self.steps is None and self.episodes is None:
            self.steps = 10_000
        self.mode = choose("--mode", self.mode, CollectMode)
        self.asynchronous = choose("--async", str(self.asynchronous).lower(), AsyncMode)
        if self.compression is not None:
            self.compression = choose("--compression", self.compression, Compression)
        self.frames = choose("--frames", self.frames, FramesForm)
        if self.license is not None:
            from expcli.formats.dataset_card import checked_license

            self.license = checked_license(self.license)
        self.images = choose("--images", self.images, ImagesForm)
        if self.shard_format is not None:
            from expcli.formats.table import format_named, shard_formats

            found = format_named(str(self.shard_format))  # listing all would read entry points
            if found is None or not found.shards:
                raise _not_one_of("--shard-format", shard_formats(), self.shard_format)
            self.shard_format = found.name
        engine = ENGINES.get(self.mode)  # None: auto
        if self.force_mode and not (engine and engine.force_mode):
            forced = " or ".join(e.mode for e in ENGINES.values() if e.force_mode)
            raise ConfigError(
                f"--force-mode applies to --mode {forced} only (the other modes give the same "
                "data for the same seed)"
            )
        if self.rewards_dtype not in REWARD_DTYPES:
            raise _not_one_of("--rewards-dtype", REWARD_DTYPES, self.rewards_dtype)
        if isinstance(self.wrappers, str):
            self.wrappers = [self.wrappers]
        if not all(isinstance(w, str) and w.strip() for w in self.wrappers):
            raise ConfigError(f"--wrapper takes MODULE:CALLABLE specs, got {self.wrappers!r}")
        if engine is not None and self.wrappers and engine.wrappers_refused is not None:
            raise ConfigError(engine.wrappers_refused)
        refusal = None if engine is None else engine.refuses_async(self.asynchronous)
        if refusal is not None:
            raise ConfigError(refusal)
        if self.seed is not None and (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or not 0 <= self.seed <= MAX_SEED - self.envs
        ):
            raise ConfigError(
                f"--seed must be an integer from 0 to {MAX_SEED - self.envs:,} (env i is "
                f"seeded with seed + i), got {self.seed!r}"
            )
        if not isinstance(self.env_kwargs, dict):
            raise ConfigError(f"--env-kwargs must be a JSON object, got {self.env_kwargs!r}")
        if self.spool and self.memory_size is not None:
            raise ConfigError(
                "--spool stores every row; --memory-size keeps the newest: give one of them"
            )
        self.step_timeout = self.step_timeout_seconds
        self.chunk_timeout = self.chunk_timeout_seconds
        return self

    def with_config(
        self, path: str | os.PathLike[str], *, given: Collection[str] = ()
    ) -> CollectSettings:
        """These settings with a TOML config file's values, but for those ``given``.

        ``given``: the settings the command line gave (it wins over the file).

        Raises:
            ConfigError: As ``read_config``.
        """
        from_file = {k: v for k, v in read_config(path).items() if k not in given}
        merged = replace(self, **from_file)
        merged.env_id = merged.env_id or ""
        return merged

    @property
    def chunk_timeout_seconds(self) -> float | None:
        """Seconds a rollout actor may take over a chunk; None: no limit.

        ``chunk_timeout``, else the step timeout (a chunk is tens of milliseconds of work).

        Raises:
            ConfigError: Not a number of seconds.
        """
        if self.chunk_timeout is None:
            return self.step_timeout_seconds
        return _seconds_or_none(self.chunk_timeout, "--chunk-timeout")


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings a TOML config file gives, keyed by ``CollectSettings`` field names.

    Raises:
        ConfigError: The file is missing or not TOML, or has an unknown key or a value of
            the wrong type (the message names the file and the key).
    """
    import tomllib  # only a run with --config reads TOML

    path = Path(path)
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError("config file not found", path=path) from None
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"not a valid TOML file: {e}", path=path) from e
    types = {f.name: f.type for f in fields(CollectSettings)}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = _ALIASES.get(key.replace("-", "_"), key.replace("-", "_"))
        if name not in types:
            known = ", ".join(sorted(k.replace("_", "-") for k in (*types, *_ALIASES)))
            raise ConfigError(f"unknown key; expected one of {known}", path=path, key=key)
        out[name] = typed_value(value, name, path, key)
    return out


_ALIASES = {
    "env": "env_id",
    "async": "asynchronous",
    "o": "output",
    "env_id": "env_id",
    "wrapper": "wrappers",
}

_KINDS: Mapping[str, tuple[type, ...]] = {
    "env_id": (str,),
    "envs": (int,),
    "steps": (int,),
    "episodes": (int,),
    "memory_size": (int,),
    "mode": (str,),
    "force_mode": (bool,),
    "asynchronous": (str,),
    "policy": (str,),
    "seed": (int,),
    "env_kwargs": (dict,),
    "ray_address": (str,),
    "num_cpus": (int,),
    "step_timeout": (int, float, str),
    "chunk_steps": (int,),
    "chunk_timeout": (int, float, str),
    "restart_on_error": (bool,),
    "infos": (bool,),
    "wrappers": (list, str),
    "rewards_dtype": (str,),
    "output": (str,),
    "compression": (str,),
    "overwrite": (bool,),
    "quiet": (bool,),
    "shard_size": (int, str),
    "resuming": (bool,),
    "spool": (bool,),
    "shard_format": (str,),
    "frames": (str,),
    "license": (str,),
    "images": (str,),
}


def typed_value(value: Any, name: str, path: Path, key: str) -> Any:
    """``value`` of setting ``name`` read from a file, checked against the setting's type.

    Raises:
        ConfigError: A value of the wrong type (the message names ``path`` and ``key``).
    """
    kinds = _KINDS[name]
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        expected = " or ".join(k.__name__ for k in kinds)
        raise ConfigError(
            f"expected {expected}, got {type(value).__name__} {value!r}", path=path, key=key
        )
    if name == "output":
        return Path(str(value))
    if name == "wrappers":
        given: Any = value
        values: list[Any] = [given] if isinstance(given, str) else list(given)
        if not all(isinstance(v, str) for v in values):
            raise ConfigError(
                f"expected a list of MODULE:CALLABLE strings, got {value!r}", path=path, key=key
            )
        return values
    return value


def choose(flag: str, value: object, choices: type[_Choice]) -> _Choice:
    """``value`` as a member of ``choices`` (its spelling).

    Raises:
        ConfigError: Not one of their spellings.
    """
    if isinstance(value, str):
        try:
            return choices(value)
        except ValueError:
            pass
    raise _not_one_of(flag, [c.value for c in choices], value)


def _not_one_of(flag: str, names: list[str] | tuple[str, ...], value: object) -> ConfigError:
    return ConfigError(f"{flag} must be one of {', '.join(names)}, got {_shown(value)}")


def _shown(value: object) -> str:
    return quoted(value) if isinstance(value, str) else repr(value)


def _seconds_or_none(value: Any, flag: str) -> float | None:
    """Seconds from a number or its text; None for 0, "none" or "off"."""
    text = str(value).strip().lower()
    if value is None or text in ("none", "off"):
        return None
    try:
        seconds = float(text) if not isinstance(value, bool) else -1.0
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ConfigError(f"{flag} must be seconds (0 or none: no limit), got {_shown(value)}")
    return seconds or None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")
