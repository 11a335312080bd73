"""``expcli collect --resume FOLDER``: continue a folder run after a kill or Ctrl-C.

The folder's manifest records the run's settings (``collector.collect_settings``) and
its segments (one per start, each with its seed and first row). A resumed run builds the
same env, options and policy, seeded afresh for the new segment (``segment_seed``: from
the run's seed and the segment's number, so a resumed run is deterministic too), marks
the episodes the kill cut as truncated in the last stored row, counts the episodes of
the stored rows, and collects what is left of the asked total.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from expcli.collect.settings import CollectSettings
from expcli.errors import ConfigError
from expcli.formats.sharded import Manifest, user_metadata

if TYPE_CHECKING:
    from expcli.collect.job import CollectJob

__all__ = ["continue_folder", "resume_settings", "segment_seed"]


def segment_seed(seed: int | None, segment: int) -> int | None:
    """The seed of a run's segment: the run's own for the first, derived for the others."""
    if seed is None or segment == 0:
        return seed
    return int(np.random.SeedSequence([seed, segment]).generate_state(1, np.uint32)[0])


def resume_settings(folder: Path, *, quiet: bool = False) -> CollectSettings:
    """The settings that continue the run stored in ``folder`` (checked later by the job).

    Raises:
        FormatError: ``folder`` is not a sharded dataset folder.
        ConfigError: It was not written by ``expcli collect``.
    """
    collector = _collector(Manifest.load(folder), folder)
    stored = collector["collect_settings"]
    known = {f.name for f in dataclasses.fields(CollectSettings)}
    values = {k: v for k, v in stored.items() if k in known}
    segments = collector["segments"]
    base = segments[0].get("seed") if segments and isinstance(segments[0], dict) else None
    values["seed"] = segment_seed(base, len(segments))
    return CollectSettings(**values, output=folder, quiet=quiet, resuming=True)


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


def continue_folder(job: CollectJob) -> Manifest:
    """Prepare ``job`` (started, its collector built) to go on with its folder's run.

    The manifest to append to, with the cut episodes marked truncated.

    Raises:
        ConfigError: The run already reached its target.
    """
    from expcli.formats.sharded import ShardWriter

    folder, s = job.output, job.settings
    manifest = Manifest.load(folder)
    collector = _collector(manifest, folder)
    segments = list(collector["segments"])
    rows = manifest.rows
    writer = ShardWriter(folder, manifest)
    if manifest.shards:
        _mark_cut_episodes(writer, folder, user_metadata(manifest.header))
    tracker = job.running.tracker
    _count_episodes(folder, tracker)
    job.targets = {"steps": s.steps, "episodes": s.episodes}
    stored = rows * s.envs
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
    segments.append({"segment": len(segments), "seed": s.seed, "first_row": rows})
    job.segments = segments
    job.before = (stored, int(collector.get("env_steps") or stored))
    return writer.manifest


def _mark_cut_episodes(writer: Any, folder: Path, metadata: dict[str, Any]) -> None:
    """Set ``truncated`` in the last stored row where an episode was running.

    The kill ended it there. The last shard is rewritten under a new name (atomically).
    """
    from expcli.formats.npz_format import read

    last = read(folder / writer.manifest.shards[-1].file)
    tensors = {name: np.array(array) for name, array in last.tensors.items()}
    ended = tensors["terminated"][-1] | tensors["truncated"][-1]
    if ended.all():
        return
    tensors["truncated"][-1] |= ~ended
    writer.replace_last(tensors, metadata)


def _count_episodes(folder: Path, tracker: Any) -> None:
    """Feed the stored rows' rewards and flags to the run's episode tracker, shard by shard."""
    from expcli.formats.sharded import open_lazy

    dataset, close = open_lazy(folder)
    try:
        rewards, terminated, truncated = (
            dataset.tensors[k] for k in ("rewards", "terminated", "truncated")
        )
        step = max(1, (1 << 20) // max(1, rewards.shape[1]))
        for start in range(0, len(rewards), step):
            rows = slice(start, start + step)
            n = rewards.shape[1]
            tracker.update(
                np.asarray(rewards[rows]).reshape(-1, n, rewards.shape[2]).sum(-1),
                np.asarray(terminated[rows]).reshape(-1, n),
                np.asarray(truncated[rows]).reshape(-1, n),
            )
    finally:
        close()
