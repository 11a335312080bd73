"""``expcli collect --resume FOLDER``: continue a folder run after a kill or Ctrl-C.

The folder's manifest records the run's settings (``collector.collect_settings``) and
its segments (one per start, each with its seed and first row). A resumed run builds the
same env, options and policy (what it takes from the folder and what from the command
line: ``resume_trust``), seeded afresh for the new segment (``segment_seed``: from the
run's seed and the segment's number, so a resumed run is deterministic too), marks the
episodes the kill cut as truncated in the last stored row, counts the episodes of the
stored rows, and collects what is left of the asked total. Everything is checked before
the folder is touched: a resume that will not run changes nothing.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.collect.output_parts import RunRows
from expcli.collect.settings import CollectSettings
from expcli.errors import ConfigError, FormatError, SchemaError
from expcli.formats.sharded import Manifest, check_shard, user_metadata

if TYPE_CHECKING:
    from expcli.collect.episode_stats import EpisodeTracker
    from expcli.memory import Memory

__all__ = ["Continuation", "continue_folder", "resume_settings", "resume_summary", "segment_seed"]

_MANIFEST = "manifest.json"


def segment_seed(seed: int | None, segment: int) -> int | None:
    """The seed of a run's segment: the run's own for the first, derived for the others."""
    if seed is None or segment == 0:
        return seed
    return int(np.random.SeedSequence([seed, segment]).generate_state(1, np.uint32)[0])


def resume_settings(
    folder: Path,
    *,
    given: Mapping[str, Any] | None = None,
    trust: bool = False,
    quiet: bool = False,
) -> CollectSettings:
    """The settings that continue the run stored in ``folder``; nothing is imported or run.

    Args:
        folder: The folder of the run.
        given: The options the command line gave (``CollectSettings`` names), merged as
            ``resume_trust`` says: a new ``steps``/``episodes`` total, how the envs run;
            a conflicting recorded setting is refused.
        trust: Run the code the recorded settings name (policy, wrappers, an env id's
            module) without its being given again (``--trust-settings``).
        quiet: No progress or summary.

    Raises:
        FormatError: ``folder`` is not a sharded dataset folder.
        ConfigError: It was not written by ``expcli collect``, a recorded setting is
            invalid, names code not given again, or conflicts with ``given``, or the run
            already reached its target.
    """
    from expcli.collect.resume_trust import (
        check_code,
        merge_given,
        recorded_settings,
        unchanged_files,
    )

    given = {k: v for k, v in (given or {}).items() if k != "quiet"}
    manifest = Manifest.load(folder)
    path = folder / _MANIFEST
    collector = _collector(manifest, folder)
    segments = collector["segments"]
    env_steps = collector.get("env_steps")
    if env_steps is not None and (type(env_steps) is not int or not 0 <= env_steps < 2**62):
        raise ConfigError(
            f"expected a count of steps, got {env_steps!r}", path=path, key="collector.env_steps"
        )
    recorded = recorded_settings(
        collector["collect_settings"], segments, manifest.header.get("num_envs"), path
    )
    values = merge_given(recorded, given, path)
    check_code(recorded, given, trust, path)
    unchanged_files(manifest.header, values, given, path)
    values["seed"] = segment_seed(recorded["seed"], len(segments))
    settings = CollectSettings(**values, output=folder, quiet=quiet, resuming=True).validate()
    stored = manifest.rows * settings.envs
    if settings.steps is not None and settings.steps <= stored:
        if "steps" in given and settings.steps < stored:
            raise ConfigError(
                f"--steps {settings.steps:,} is fewer than the {stored:,} steps the folder "
                "holds; give a larger total",
                path=folder,
            )
        raise ConfigError(
            f"holds {stored:,} of {settings.steps:,} steps; nothing to resume", path=folder
        )
    return settings


def resume_summary(settings: CollectSettings) -> str:
    """One line: the recorded settings a resumed run goes on with."""
    target = (
        f"{settings.steps:,} steps"
        if settings.steps is not None
        else f"{settings.episodes:,} episodes"
    )
    parts = [settings.env_id, f"{settings.envs} envs", f"policy {settings.policy}"]
    parts += [f"wrapper {w}" for w in settings.wrappers]
    if settings.env_kwargs:
        parts.append(f"env kwargs {json.dumps(settings.env_kwargs)}")
    parts.append(f"rewards {settings.rewards_dtype}")
    if settings.infos:
        parts.append("infos")
    parts.append(f"segment seed {settings.seed}")
    return f"resuming {settings.output} with its recorded settings: {', '.join(parts)}; to {target}"


def _collector(manifest: Manifest, folder: Path) -> dict[str, Any]:
    collector = manifest.header.get("collector")
    if not (
        isinstance(collector, dict)
        and isinstance(collector.get("collect_settings"), dict)
        and isinstance(collector.get("segments"), list)
    ):
        raise ConfigError(
            f"{folder} was not written by `expcli collect` to a folder; nothing to resume"
        )
    return collector


@dataclass(frozen=True, slots=True)
class Continuation:
    """Where a resumed folder run goes on from.

    Attributes:
        manifest: The manifest to append to.
        segments: The run's segments, this one last.
        targets: The whole run's ``steps`` and ``episodes`` (the settings now hold what is
            left of them).
        before: (steps, env steps) of the segments before this one.
    """

    manifest: Manifest
    segments: list[dict[str, Any]]
    targets: dict[str, int | None]
    before: tuple[int, int]


def continue_folder(folder: Path, settings: CollectSettings, rows: RunRows) -> Continuation:
    """Prepare a run (its staging memory made, its envs built) to go on with ``folder``'s.

    Everything is checked before the folder is touched: the env's tensors (``rows.memory``)
    against the manifest's, the last shard's size and CRC-32, the target. Then the
    episodes the kill cut are marked truncated in the last stored row, the stored
    episodes are fed to ``rows.tracker``, and ``settings.steps`` (or ``episodes``)
    becomes what is left to collect.

    Raises:
        SchemaError: The env's tensors (spaces, rewards dtype) are not the folder's.
        FormatError: The last shard is damaged, or not a regular file.
        ConfigError: The run already reached its target.
    """
    from expcli.formats.sharded import ShardWriter

    s = settings
    manifest = Manifest.load(folder)
    collector = _collector(manifest, folder)
    _check_tensors(settings.envs, rows.memory, manifest, folder / _MANIFEST)
    if manifest.shards:
        _check_last_shard(folder, manifest)
    tracker = rows.tracker
    last = _count_episodes(folder, manifest, tracker)
    segments = list(collector["segments"])
    stored = manifest.rows * s.envs
    targets = {"steps": s.steps, "episodes": s.episodes}
    if s.steps is not None:
        if stored >= s.steps:
            raise ConfigError(f"{folder} holds {stored:,} of {s.steps:,} steps; nothing to resume")
        s.steps -= stored
    else:
        assert s.episodes is not None
        if tracker.complete >= s.episodes:
            raise ConfigError(
                f"{folder} holds {tracker.complete:,} of {s.episodes:,} episodes; nothing to resume"
            )
        s.episodes -= tracker.complete
    writer = ShardWriter(folder, manifest, frames=s.frames, license=s.license, images=s.images)
    if last is not None:
        writer.replace_last(last, user_metadata(manifest.header))
    segments.append({"segment": len(segments), "seed": s.seed, "first_row": manifest.rows})
    before = (stored, int(collector.get("env_steps") or stored))
    return Continuation(writer.manifest, segments, targets, before)


def _check_tensors(num_envs: int, memory: Memory, manifest: Manifest, path: Path) -> None:
    """Refuse an env whose tensors (names, dtypes, shapes) are not the folder's.

    ``infos/<key>`` tensors may come and go (a key met later is read as NaN before).
    """
    if manifest.header.get("num_envs") != num_envs:
        raise SchemaError(
            f"records {manifest.header.get('num_envs')!r} envs; the run has {num_envs}",
            path=path,
            key="num_envs",
        )
    known = manifest.header.get("tensors")
    if not isinstance(known, dict):
        raise SchemaError("lacks its 'tensors' object", path=path, key="tensors")
    now = {spec.name: spec.to_json() for spec in memory.to_dataset().specs()}
    for name in sorted(set(known) | set(now)):
        if name.startswith("infos/"):
            continue
        if known.get(name) != now.get(name):
            raise SchemaError(
                f"the env now gives {_spec_text(now.get(name))} where the folder holds "
                f"{_spec_text(known.get(name))}: resuming would write shards no reader "
                "takes (was the env, its package or --rewards-dtype changed?)",
                path=path,
                key=f"tensors.{name}",
            )


def _spec_text(spec: Any) -> str:
    if not isinstance(spec, dict):
        return "no such tensor"
    return f"{spec.get('dtype')} {tuple(spec.get('shape') or ())}"


def _check_last_shard(folder: Path, manifest: Manifest) -> None:
    """Refuse a last shard that is not a regular file of the folder, or is damaged.

    Raises:
        FormatError: Not a regular file in the folder, or damaged (``inspect --check``
            would fail): resuming would rewrite it and hide the damage.
    """
    entry = manifest.shards[-1]
    file = folder / entry.file
    try:
        mode = file.lstat().st_mode
    except FileNotFoundError:
        raise FormatError("listed in the manifest but missing", path=file) from None
    if not stat.S_ISREG(mode):
        raise FormatError("not a regular file; refusing to resume over it", path=file)
    problem = check_shard(folder, entry)
    if problem is not None:
        raise FormatError(
            f"the last shard is damaged ({problem}); resuming would rewrite it and hide the "
            "damage: restore it, or remove it from the manifest",
            path=file,
        )


def _count_episodes(
    folder: Path, manifest: Manifest, tracker: EpisodeTracker
) -> dict[str, np.ndarray] | None:
    """Feed the stored rows' rewards and flags to the run's episode tracker, shard by shard.

    Read through the sharded folder's own reader (``sharded.open_lazy``). The episodes
    the kill cut (the envs not ended in the last row) end there, truncated.

    Returns:
        The last shard's tensors with those ends marked, to write back; None when no
        episode was cut (or the folder holds no rows).
    """
    from expcli.formats.sharded import open_lazy

    dataset, close = open_lazy(folder)
    try:
        tensors = dataset.tensors
        rewards, terminated, truncated = (
            tensors[k] for k in ("rewards", "terminated", "truncated")
        )
        total = len(rewards)
        last: dict[str, np.ndarray] | None = None
        cut: np.ndarray | None = None
        if manifest.shards and total:
            entry = manifest.shards[-1]
            first = total - entry.rows
            ended = np.asarray(terminated[total - 1]) | np.asarray(truncated[total - 1])
            if not ended.all():
                cut = ~ended
                last = {
                    name: np.array(array[first:total])
                    for name, array in tensors.items()
                    if name not in entry.missing
                }
                last["truncated"][-1] |= cut  # the kill ended them there
        n = rewards.shape[1]
        step = max(1, (1 << 20) // max(1, n))
        for start in range(0, total, step):
            rows = slice(start, start + step)
            ends = np.asarray(truncated[rows]).reshape(-1, n)
            if cut is not None and start + step >= total:
                ends = ends.copy()
                ends[-1] |= cut.reshape(-1)
            tracker.update(
                np.asarray(rewards[rows]).reshape(-1, n, rewards.shape[2]).sum(-1),
                np.asarray(terminated[rows]).reshape(-1, n),
                ends,
            )
        return last
    finally:
        close()
