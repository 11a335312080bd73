"""What a collect run is asked to do: the settings, and reading them from a TOML file.

Every command-line option of ``expcli collect`` has a key of the same name in the config
file (dashes or underscores); the command line wins over the file.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from expcli.errors import ConfigError

__all__ = ["MODES", "CollectSettings", "read_config"]

MODES = ("auto", "dummy", "subproc", "ray", "ray-subproc", "vector")
ASYNC_MODES = ("none", "idle", "restart", "continue")
COMPRESSIONS = ("none", "gzip", "lzf")
REWARD_DTYPES = ("float32", "float64")


@dataclass
class CollectSettings:
    """Options of one collect run (defaults are the command's)."""

    env_id: str = ""
    envs: int = 1
    steps: int | None = None
    episodes: int | None = None
    memory_size: int | None = None
    mode: str = "auto"
    asynchronous: str = "restart"
    policy: str = "random"
    seed: int | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    ray_address: str | None = None
    num_cpus: int | None = None
    infos: bool = False
    wrappers: list[str] = field(default_factory=list)
    rewards_dtype: str = "float32"
    output: Path | None = None
    compression: str = "none"
    overwrite: bool = False
    quiet: bool = False

    def validate(self) -> CollectSettings:
        """Check every value; fill in the default step count.

        Raises:
            ConfigError: A value of the wrong type or out of range, naming its option.
        """
        if not self.env_id:
            raise ConfigError("no env id: give ENV_ID (e.g. CartPole-v1) or `env` in --config")
        for name in ("envs", "steps", "episodes", "memory_size", "num_cpus"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{_flag(name)} must be a positive integer, got {value!r}")
        if self.steps is not None and self.episodes is not None:
            raise ConfigError("give --steps or --episodes, not both")
        if self.steps is None and self.episodes is None:
            self.steps = 10_000
        _choose("--mode", self.mode, MODES)
        self.asynchronous = str(self.asynchronous).lower()
        _choose("--async", self.asynchronous, ASYNC_MODES)
        _choose("--compression", self.compression, COMPRESSIONS)
        _choose("--rewards-dtype", self.rewards_dtype, REWARD_DTYPES)
        if isinstance(self.wrappers, str):
            self.wrappers = [self.wrappers]
        if not all(isinstance(w, str) and w.strip() for w in self.wrappers):
            raise ConfigError(f"--wrapper takes MODULE:CALLABLE specs, got {self.wrappers!r}")
        if self.mode == "vector" and self.wrappers:
            raise ConfigError(
                "--mode vector builds Gymnasium's batched env, which --wrapper cannot wrap; "
                "use --mode dummy or subproc"
            )
        if self.mode == "vector" and self.asynchronous != "restart":
            raise ConfigError(
                "--mode vector always resets an ended env (Gymnasium's autoreset); it takes "
                "--async restart only"
            )
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int)
        ):
            raise ConfigError(f"--seed must be an integer, got {self.seed!r}")
        if not isinstance(self.env_kwargs, dict):
            raise ConfigError(f"--env-kwargs must be a JSON object, got {self.env_kwargs!r}")
        return self


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings a TOML config file gives, keyed by ``CollectSettings`` field names.

    Raises:
        ConfigError: The file is missing or not TOML, or has an unknown key or a value of
            the wrong type (the message names the file and the key).
    """
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
        out[name] = _typed(value, name, path, key)
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
    "asynchronous": (str,),
    "policy": (str,),
    "seed": (int,),
    "env_kwargs": (dict,),
    "ray_address": (str,),
    "num_cpus": (int,),
    "infos": (bool,),
    "wrappers": (list, str),
    "rewards_dtype": (str,),
    "output": (str,),
    "compression": (str,),
    "overwrite": (bool,),
    "quiet": (bool,),
}


def _typed(value: Any, name: str, path: Path, key: str) -> Any:
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


def _choose(flag: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{flag} must be one of {', '.join(choices)}, got {value!r}")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")
