"""Checks of a dataset that read no rows: the metadata against the data, and Minari episodes.

* ``metadata``: sizes, dtypes and spaces that the metadata gives and the data contradicts
  (Dict and Tuple spaces leaf by leaf: each leaf against its own tensor).
* ``d4rl_flags``: a D4RL file with neither ``terminals`` nor ``timeouts``.
* ``minari_episodes``: Minari episodes whose observations are not one row longer than their
  actions (found in the file itself: such a file cannot be read into expcli's schema).
* ``shards``: a sharded folder's shards whose size or CRC-32 is not the manifest's (each
  shard is read once, chunk by chunk: this one does read the rows, as bytes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import FormatError
from expcli.summary.checks import FAILED, PASSED, SHOWN_ROWS, SKIPPED, Finding
from expcli.summary.space_bounds import SpaceBounds, leaf_bounds

__all__ = ["minari_episode_findings", "shard_findings", "static_findings"]


def static_findings(
    metadata: Mapping[str, Any],
    specs: Mapping[str, tuple[np.dtype[Any], tuple[int, ...]]],
    memory_size: int,
    episodes: int | None,
) -> list[Finding]:
    """Checks of the metadata against the data's shapes, dtypes and counts.

    Args:
        metadata: The dataset's metadata.
        specs: Name to ``(dtype, feature shape)`` of every tensor.
        memory_size: Rows.
        episodes: Episodes found (complete and incomplete), or None when unknown.
    """
    problems: list[str] = []
    checked = False
    for key, prefix in (("observation_space", "observations"), ("action_space", "actions")):
        leaves = leaf_bounds(dict(metadata), prefix)
        if len(leaves) > 1 and prefix in specs and not any(n in specs for n, _, _ in leaves):
            continue  # written before leaves were stored apart: flattened, not checked
        for name, _, bounds in leaves:
            if bounds is None:
                continue
            if name not in specs:
                if len(leaves) > 1:
                    checked = True
                    problems.append(f"{key} has the leaf {name!r}, missing from the data")
                continue
            checked = True
            problems += _leaf_problems(key, name, bounds, *specs[name])
    minari = metadata.get("minari")
    if metadata.get("layout") == "minari" and isinstance(minari, dict):
        for key, found in (("total_steps", memory_size), ("total_episodes", episodes)):
            said = minari.get(key)
            if isinstance(said, int) and found is not None:
                checked = True
                if said != found:
                    problems.append(f"metadata.json says {key} = {said}; the data has {found}")
    out = [_listing("metadata", problems, checked, "metadata agrees with the data")]
    if metadata.get("layout") == "d4rl":
        section = metadata.get("d4rl")
        listed = section.get("missing") if isinstance(section, dict) else None
        missing = {m for m in listed if isinstance(m, str)} if isinstance(listed, list) else set()
        if {"terminals", "timeouts"} <= missing:
            message = "neither 'terminals' nor 'timeouts': episode ends are unknown"
            out.append(Finding("d4rl_flags", FAILED, message, 1))
        else:
            out.append(Finding("d4rl_flags", PASSED, "episode ends are recorded"))
    return out


def minari_episode_findings(path: Path) -> Finding | None:
    """Minari episodes whose observations are not one row longer than their actions.

    The check itself is the Minari layout's (it reads only the datasets' shapes); the
    message lists the episode ids. Returns None when ``path`` is not a Minari file or
    folder.
    """
    from expcli.formats.layouts.minari.layout import mismatched_episodes

    try:
        bad = mismatched_episodes(path)
    except FormatError as e:
        return Finding("minari_episodes", FAILED, e.message, 1)
    if bad is None:
        return None
    if not bad:
        return Finding("minari_episodes", PASSED, "every episode has one observation more")
    ids = ", ".join(map(str, bad[:SHOWN_ROWS]))
    return Finding(
        "minari_episodes",
        FAILED,
        f"episodes whose observations do not have one row more than their actions: {ids}"
        + (" ..." if len(bad) > SHOWN_ROWS else ""),
        len(bad),
    )


def _leaf_problems(
    key: str, name: str, bounds: SpaceBounds, dtype: np.dtype[Any], feature: tuple[int, ...]
) -> list[str]:
    """What the metadata's space says of one tensor and the tensor contradicts."""
    problems = []
    where = f"{key} is {bounds.text}" if "/" not in name else f"{key} has {name} as {bounds.text}"
    if not bounds.fits_shape(feature):
        problems.append(
            f"{where}, stored as rows of shape {bounds.shape}, but {name!r} has feature "
            f"shape {feature}"
        )
    if bounds.integral and np.dtype(dtype).kind not in "iub":
        problems.append(f"{where} but {name!r} holds {np.dtype(dtype).name}")
    elif bounds.kind == "Box" and bounds.dtype and np.dtype(bounds.dtype) != dtype:
        problems.append(f"{where} but {name!r} holds {np.dtype(dtype).name}")
    return problems


def shard_findings(folder: Path, progress: Callable[[float], None] | None = None) -> Finding:
    """Whether every shard of the sharded ``folder`` has the size and CRC-32 its manifest records.

    A failure names each bad shard. ``progress`` is called with the fraction of bytes checked.
    """
    from expcli.formats.sharded import check_shards

    problems = check_shards(folder, progress)
    return _listing("shards", problems, True, "every shard matches the manifest's CRC-32")


def _listing(check: str, problems: list[str], checked: bool, passed: str) -> Finding:
    if problems:
        return Finding(check, FAILED, "; ".join(problems), len(problems))
    if not checked:
        return Finding(check, SKIPPED, "no spaces or counts in the metadata to check")
    return Finding(check, PASSED, passed)
