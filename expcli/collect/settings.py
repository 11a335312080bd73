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

__all__ = ["MAX_ENVS", "MAX_SEED", "MODES", "CollectSettings", "read_config"]

MODES = ("auto", "dummy", "subproc", "ray", "ray-subproc", "vector", "envpool")
ASYNC_MODES = ("none", "idle", "restart", "continue")
COMPRESSIONS = ("none", "gzip", "lzf")
# Envs of one run: far beyond what one machine steps usefully (Atari runs use 8 to 256),
# and low enough that a typo such as 100000000 is refused instead of filling the memory.
MAX_ENVS = 65_536
MAX_SEED = 2**64 - 1  # numpy and Gymnasium take any seed >= 0; 64 bits is what other tools take


@dataclass
class CollectSettings:
    """Options of one collect run (defaults are the command's)."""

    env_id: str = ""
    envs: int = 1
    steps: int | None = None
    episodes: int | None = None
    memory_size: int | None = None
    mode: str = "auto"
    force_mode: bool = False
    asynchronous: str = "restart"
    policy: str = "random"
    seed: int | None = None
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    ray_address: str | None = None
    num_cpus: int | None = None
    infos: bool = False
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
        if self.envs > MAX_ENVS:
            raise ConfigError(
                f"--envs must be at most {MAX_ENVS:,}, got {self.envs:,}: each env is a live "
                "Gymnasium env in this machine's memory"
            )
        if self.steps is not None and self.episodes is not None:
            raise ConfigError("give --steps or --episodes, not both")
        if self.steps is None and self.episodes is None:
            self.steps = 10_000
        _choose("--mode", self.mode, MODES)
        self.asynchronous = str(self.asynchronous).lower()
        _choose("--async", self.asynchronous, ASYNC_MODES)
        _choose("--compression", self.compression, COMPRESSIONS)
        if self.force_mode and self.mode != "vector":
            raise ConfigError(
                "--force-mode applies to --mode vector only (the other modes give the same "
                "data for the same seed)"
            )
        if self.mode == "envpool":
            from expcli.envs.envpool_envs import check_envpool_async

            check_envpool_async(self.asynchronous)
        if self.mode == "vector" and self.asynchronous != "restart":
            raise ConfigError(
                "--mode vector always resets an ended env (Gymnasium's autoreset); it takes "
                "--async restart only"
            )
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


_ALIASES = {"env": "env_id", "async": "asynchronous", "o": "output", "env_id": "env_id"}

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
    "infos": (bool,),
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
    return value


def _choose(flag: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{flag} must be one of {', '.join(choices)}, got {value!r}")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")
