"""What ``collect --resume FOLDER`` takes from the folder's manifest and what from the command line.

A folder may come from anywhere (a download, a colleague), so its recorded settings are
data to check, never code to run on their word:

* Every recorded setting is type- and range-checked first; a bad one is refused naming
  ``manifest.json`` and its key.
* Settings that run code (a policy other than ``random``, ``--wrapper``s, an env id with a
  ``module:`` part, env kwargs naming ``MODULE:NAME``, a Ray cluster's address, whose
  replies this process unpickles) are used only when the command line gives them again,
  identically, or with ``--trust-settings``. A policy or wrapper file
  whose sha256 is no longer the recorded one is refused unless given again.
* Options that define the data (env id, ``--envs``, ``--seed``, ``--policy``, ``--wrapper``,
  ``--env-kwargs``, ``--rewards-dtype``, ``--infos``, ``--async``, ``--force-mode``) or
  its shards (``--shard-format``) conflict unless equal to the recorded ones. ``--steps``
  (``--episodes``) sets the run's new total. How the envs run (``--mode`` among the modes
  that give the same data, ``--num-cpus``, ``--ray-address``, timeouts, ``--chunk-steps``,
  ``--restart-on-error``, ``--shard-size``) is taken from the command line. Options about
  another output (``-o``, ``--overwrite``, ``--compression``, ``--memory-size``,
  ``--spool``, ``--config``) are refused.

Nothing here writes; ``resume.continue_folder`` checks the rest (the env's spaces against
the manifest, the last shard's CRC) before the folder is touched.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from expcli.collect.engines import engine_of
from expcli.collect.settings import MAX_ENVS, MAX_SEED, CollectSettings, typed_value
from expcli.collect.shard_sink import parse_shard_size
from expcli.errors import ConfigError
from expcli.named_callables import file_sha256, is_file_target

__all__ = [
    "check_code",
    "code_settings",
    "merge_given",
    "recorded_settings",
    "unchanged_files",
]

SETTINGS_KEY = "collector.collect_settings"
# How the envs run, and the license the card states: the command line's value is taken
# (the data stay the same).
_RUNTIME = frozenset(
    {"mode", "num_cpus", "ray_address", "step_timeout", "chunk_steps", "chunk_timeout"}
    | {"restart_on_error", "shard_size", "frames", "license"}
    | {"restart_on_error", "shard_size", "frames", "images"}
)
_NOT_WITH_RESUME = {
    "output": "-o/--output",
    "overwrite": "--overwrite",
    "compression": "--compression",
    "memory_size": "--memory-size",
    "spool": "--spool/--no-spool",
    "config": "--config",
}
_NOT_RECORDED = ("output", "quiet", "resuming", "overwrite")
_NULLABLE = frozenset(
    {f.name for f in fields(CollectSettings) if f.default is None} | {"step_timeout"}
)
_FLAGS = {"env_id": "ENV_ID", "asynchronous": "--async", "wrappers": "--wrapper"}
_IMPORT_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def _flag(name: str) -> str:
    return _FLAGS.get(name, "--" + name.replace("_", "-"))


def recorded_settings(
    stored: Mapping[str, Any], segments: list[Any], num_envs: Any, path: Path
) -> dict[str, Any]:
    """The run's settings from its manifest's ``collect_settings``, every value checked.

    ``seed`` is the run's (its first segment's).

    Raises:
        ConfigError: A value of the wrong type or out of range (naming ``path`` and the key).
    """
    known = {f.name for f in fields(CollectSettings)} - set(_NOT_RECORDED)
    values: dict[str, Any] = {}
    for name, value in stored.items():
        if name not in known or (value is None and name in _NULLABLE):
            continue
        values[name] = typed_value(value, name, path, f"{SETTINGS_KEY}.{name}")
    for name in ("envs", "steps", "episodes"):
        value = values.get(name)
        if value is not None and not 1 <= value <= (MAX_ENVS if name == "envs" else 2**62):
            raise ConfigError(
                f"expected a positive integer{' up to 65,536' if name == 'envs' else ''}, "
                f"got {value!r}",
                path=path,
                key=f"{SETTINGS_KEY}.{name}",
            )
    envs = values.get("envs", 1)
    if num_envs != envs:
        raise ConfigError(
            f"the manifest's num_envs {num_envs!r} is not the recorded envs {envs!r}",
            path=path,
            key="num_envs",
        )
    first = segments[0] if segments else {}
    if not all(isinstance(segment, dict) for segment in segments):
        raise ConfigError("expected a list of objects", path=path, key="collector.segments")
    seed = first.get("seed")
    if seed is not None and (type(seed) is not int or not 0 <= seed <= MAX_SEED - envs):
        raise ConfigError(
            f"expected an integer from 0 to {MAX_SEED - envs:,} or null, got {seed!r}",
            path=path,
            key="collector.segments[0].seed",
        )
    values["seed"] = seed
    try:
        CollectSettings(**values).validate()
        if values.get("shard_size") is not None:
            parse_shard_size(values["shard_size"])
    except ConfigError as e:
        raise ConfigError(f"not a valid setting: {e.message}", path=path, key=SETTINGS_KEY) from e
    return values


def merge_given(
    recorded: Mapping[str, Any], given: Mapping[str, Any], path: Path
) -> dict[str, Any]:
    """The recorded settings with the options the command line gave.

    Raises:
        ConfigError: An option that does not apply to ``--resume`` or conflicts with a
            recorded setting (one line naming both).
    """
    values = dict(recorded)
    defaults = {f.name: f.default for f in fields(CollectSettings)}
    for name, value in given.items():
        if name in _NOT_WITH_RESUME:
            raise ConfigError(
                f"{_NOT_WITH_RESUME[name]} does not apply to --resume (the folder is the "
                "output; its run goes on with its recorded settings)"
            )
        before = recorded.get(name, [] if name == "wrappers" else defaults.get(name))
        if name in ("steps", "episodes"):
            other = "episodes" if name == "steps" else "steps"
            if recorded.get(other) is not None and recorded.get(name) is None:
                raise _conflict(name, value, f"the run's target is {_flag(other)}", path)
            values[name] = value
        elif name == "mode" and value != before and _own_data(value, before):
            raise _conflict(name, value, f"the recorded --mode {before}", path)
        elif name in _RUNTIME:
            values[name] = value
        elif value != before:
            raise _conflict(name, value, f"the recorded {_flag(name)} {_shown(before)}", path)
    return values


def _own_data(*modes: object) -> bool:
    """Whether one of ``modes`` is an engine whose data may differ from the others'.

    Gymnasium's batched env or EnvPool's: another implementation of the env
    (``Engine.own_implementation``).
    """
    return any(e is not None and e.own_implementation for e in map(engine_of, modes))


def _conflict(name: str, value: Any, recorded: str, path: Path) -> ConfigError:
    return ConfigError(
        f"{_flag(name)} {_shown(value)} conflicts with {recorded}; a resumed run keeps its "
        f"recorded settings: leave {_flag(name)} out",
        path=path,
        key=f"{SETTINGS_KEY}.{name}",
    )


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(str(value))  # a StrEnum's spelling, not its member
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)


def code_settings(values: Mapping[str, Any]) -> dict[str, str]:
    """The settings that would import or run code, each as an option to give again."""
    out: dict[str, str] = {}
    policy = values.get("policy", "random")
    if policy.strip() != "random":
        out["policy"] = f"--policy {policy!r}"
    if values.get("wrappers"):
        out["wrappers"] = " ".join(f"--wrapper {w!r}" for w in values["wrappers"])
    if ":" in values.get("env_id", ""):
        out["env_id"] = f"ENV_ID {values['env_id']!r}"
    if _imports(values.get("env_kwargs", {})):
        out["env_kwargs"] = f"--env-kwargs '{json.dumps(values['env_kwargs'])}'"
    if values.get("ray_address"):  # a cluster sends back what this process unpickles
        out["ray_address"] = f"--ray-address {values['ray_address']!r}"
    return out


def _imports(value: Any) -> bool:
    """Whether a JSON value holds a ``MODULE:NAME`` or ``file.py:NAME`` string anywhere."""
    if isinstance(value, dict):
        return any(_imports(v) for v in value.values())
    if isinstance(value, list):
        return any(_imports(v) for v in value)
    if not isinstance(value, str):
        return False
    target, sep, name = value.strip().rpartition(":")
    return bool(sep and name) and (
        _IMPORT_SPEC.fullmatch(value.strip()) is not None or is_file_target(target)
    )


def check_code(
    recorded: Mapping[str, Any], given: Mapping[str, Any], trust: bool, path: Path
) -> None:
    """Refuse recorded settings that run code, unless given again or trusted.

    Raises:
        ConfigError: Code the user did not name on the command line (nothing was run).
    """
    untold = [shown for name, shown in code_settings(recorded).items() if name not in given]
    if untold and not trust:
        raise ConfigError(
            f"the recorded settings run code from outside the folder: {', '.join(untold)}; "
            "nothing was run. Give them again on the command line to run them, or pass "
            "--trust-settings",
            path=path,
            key=SETTINGS_KEY,
        )


def unchanged_files(
    header: Mapping[str, Any], values: Mapping[str, Any], given: Mapping[str, Any], path: Path
) -> None:
    """Refuse a policy or wrapper file edited since the run, unless given again.

    Raises:
        ConfigError: The file's sha256 is not the recorded one.
    """
    collector = header.get("collector")
    policy = collector.get("policy") if isinstance(collector, dict) else None
    if "policy" not in given:
        _same_file("--policy", values.get("policy", "random"), policy, path)
    wrappers = header.get("wrappers")
    if "wrappers" not in given and isinstance(wrappers, list):
        for spec, description in zip(values.get("wrappers", []), wrappers, strict=False):
            _same_file("--wrapper", spec, description, path)


def _same_file(flag: str, spec: str, description: Any, path: Path) -> None:
    recorded = description.get("sha256") if isinstance(description, dict) else None
    if not isinstance(recorded, str):
        return
    target, sep, _ = spec.rpartition(":")
    file = Path(target) if sep and target and is_file_target(target) else Path(spec)
    if not file.is_file():
        return  # the run refuses a missing file itself, before writing anything
    now = file_sha256(file)
    if now != recorded:
        raise ConfigError(
            f"{flag} {spec!r}: {file} changed since the run recorded it (sha256 "
            f"{recorded[:12]}... then, {now[:12]}... now); give {flag} {spec!r} again to go "
            "on with the file as it is",
            path=path,
            key=f"{SETTINGS_KEY}.{flag[2:]}",
        )
