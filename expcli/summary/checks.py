"""Structural checks of a dataset (``expcli inspect --check``), streamed with the statistics.

Statistics do not catch a broken dataset; these do. Each check yields a ``Finding`` that
names the rows it concerns as ``(row, env)`` pairs of the stored tensors:

* ``continuity``: ``next_observations[t] != observations[t + 1]`` inside an episode.
* ``autoreset``: the row right after an episode's end whose observation is that episode's
  final observation (``next_observations`` at the end): a vector env's autoreset step
  recorded as a transition. Resetting at once (the final observation kept aside, the
  next row starting from the reset observation) passes.
* ``both_flags``: a row both ``terminated`` and ``truncated``.
* ``finite``: NaN or inf in written rows (skrl's NaN-filled unwritten rows are a note).
* ``action_space`` / ``observation_space``: values outside the spaces in the metadata.
* ``metadata``: sizes, dtypes and spaces that the metadata gives and the data contradicts.
* ``d4rl_flags``: a D4RL file with neither ``terminals`` nor ``timeouts``.
* ``minari_episodes``: Minari episodes whose observations are not one row longer than their
  actions (found in the file itself: such a file cannot be read into expcli's schema).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from expcli.summary.chronology import Chunk
from expcli.summary.space_bounds import SpaceBounds, parse_space

__all__ = ["Finding", "RowFinder", "minari_episode_findings", "static_findings"]

SHOWN_ROWS = 10
"""Rows listed per finding; ``count`` says how many there are in all."""

PASSED, FAILED, SKIPPED, NOTE = "passed", "failed", "skipped", "note"
_EPISODE = re.compile(r"episode_[0-9]+")


@dataclass(frozen=True, slots=True)
class Finding:
    """The outcome of one check.

    Attributes:
        check: The check's name (see the module docstring).
        status: ``passed``, ``failed``, ``skipped`` (could not run) or ``note`` (worth
            knowing, not a failure).
        message: What was found, naming the tensor or metadata key.
        count: Rows concerned (or items, for metadata checks).
        rows: The first ``(row, env)`` pairs concerned, in chronological order.
    """

    check: str
    status: str
    message: str
    count: int = 0
    rows: tuple[tuple[int, int], ...] = ()

    @property
    def failed(self) -> bool:
        """Whether the dataset failed this check."""
        return self.status == FAILED

    def to_json(self) -> dict[str, Any]:
        """One entry of the ``checks`` list of ``inspect --json``."""
        return {
            "check": self.check,
            "status": self.status,
            "message": self.message,
            "count": self.count,
            "rows": [list(pair) for pair in self.rows],
        }


@dataclass
class _Tally:
    """Rows found by one row check so far."""

    count: int = 0
    rows: list[tuple[int, int]] = field(default_factory=list)

    def add(self, chunk: Chunk, mask: np.ndarray) -> None:
        """Count the rows of ``mask`` (``(rows, columns)`` of ``chunk``) that are set."""
        found = np.argwhere(mask)  # (row in chunk, column in chunk), row-major: chronological
        self.count += len(found)
        room = SHOWN_ROWS - len(self.rows)
        for i, j in found[: max(room, 0)].tolist():
            self.rows.append((chunk.start + i, chunk.first + j))


class RowFinder:
    """Runs the row checks over chronologically ordered chunks (see ``chronology``).

    Args:
        specs: Name to ``(dtype, feature shape)`` of every tensor.
        metadata: The dataset's metadata (spaces, layout, derived tensors).
        num_envs: Env columns.
        memory_size: Rows.
    """

    def __init__(
        self,
        specs: Mapping[str, tuple[np.dtype[Any], tuple[int, ...]]],
        metadata: Mapping[str, Any],
        num_envs: int,
        memory_size: int,
    ) -> None:
        self.specs = dict(specs)
        self.memory_size = memory_size
        self._tallies: dict[str, _Tally] = {}
        self._finite: dict[str, _Tally] = {}
        derived = _derived(metadata)
        both = {"observations", "next_observations"} <= self.specs.keys()
        alike = both and self.specs["observations"][1] == self.specs["next_observations"][1]
        self.pairs = alike and not derived
        if derived:
            self._skip_reason = "next_observations are derived from observations by the reader"
        elif both and not alike:
            self._skip_reason = "observations and next_observations differ in feature shape"
        else:
            self._skip_reason = "needs observations and next_observations"
        self.flags = {"terminated", "truncated"} & self.specs.keys()
        self.spaces: dict[str, SpaceBounds] = {}
        for key, names in (
            ("action_space", ("actions",)),
            ("observation_space", ("observations", "next_observations")),
        ):
            bounds = parse_space(metadata.get(key))
            for name in names:
                if bounds is not None and name in self.specs:
                    if bounds.fits_shape(self.specs[name][1]):
                        self.spaces[name] = bounds
        dtype, feature = self.specs.get("next_observations", (np.dtype(np.float64), ()))
        self._last_next = np.zeros((num_envs, *feature), dtype=dtype)
        self._has_prev = np.zeros(num_envs, dtype=bool)
        self._prev_done = np.zeros(num_envs, dtype=bool)
        self._prev_row = np.zeros(num_envs, dtype=np.int64)

    def tensors_needed(self) -> set[str]:
        """The tensors ``update`` reads."""
        names = set(self.flags) | set(self.spaces)
        if self.pairs:
            names |= {"observations", "next_observations"}
        return names

    def update(self, chunk: Chunk, done: np.ndarray, nonfinite: set[str]) -> None:
        """Check one chunk; ``done`` is ``(rows, columns)``, ``nonfinite`` the tensors in
        which the statistics found NaN or inf in this chunk."""
        arrays = chunk.arrays
        if len(self.flags) == 2:
            both = _any_feature(arrays["terminated"]) & _any_feature(arrays["truncated"])
            self._tally("both_flags").add(chunk, both)
        for name in sorted(nonfinite):
            values = arrays.get(name)
            if values is None or values.dtype.kind != "f":
                continue
            bad = ~np.isfinite(values.reshape(*values.shape[:2], -1)).all(axis=2)
            self._finite.setdefault(name, _Tally()).add(chunk, bad)
        for name, bounds in self.spaces.items():
            check = "action_space" if name == "actions" else "observation_space"
            self._tally(f"{check}:{name}").add(chunk, bounds.outside(arrays[name]))
        if self.pairs:
            self._pairs(chunk, done)

    def _pairs(self, chunk: Chunk, done: np.ndarray) -> None:
        """Each row against the row before it in its column (the carry between chunks)."""
        observations = chunk.arrays["observations"]
        following = chunk.arrays["next_observations"]
        columns = chunk.columns
        carried = self._last_next[columns]
        previous = np.concatenate([carried[None], following[:-1]])
        has_prev = np.ones(done.shape, dtype=bool)
        has_prev[0] = self._has_prev[columns]
        prev_done = np.concatenate([self._prev_done[columns][None], done[:-1]])
        differs = _differs(previous, observations)
        jump = has_prev & ~prev_done & differs
        tally = self._tally("continuity")
        for j in np.flatnonzero(jump[0]).tolist():  # the pair's earlier row: an earlier chunk
            tally.count += 1
            if len(tally.rows) < SHOWN_ROWS:
                tally.rows.append((int(self._prev_row[columns[j]]), int(columns[j])))
        tally.add(chunk, jump[1:])  # row i of jump[1:] is the pair's earlier row, start + i
        self._tally("autoreset").add(chunk, has_prev & prev_done & ~differs)
        self._last_next[columns] = following[-1]
        self._has_prev[columns] = True
        self._prev_done[columns] = done[-1]
        self._prev_row[columns] = chunk.stop - 1

    def _tally(self, name: str) -> _Tally:
        return self._tallies.setdefault(name, _Tally())

    def findings(self, *, unwritten: int = 0) -> list[Finding]:
        """Every row check's outcome."""
        out = []
        if self.pairs:
            out.append(
                _row_finding(
                    "continuity",
                    self._tally("continuity"),
                    "next_observations[t] != observations[t + 1] inside an episode at rows t",
                    "next_observations match the following observations inside episodes",
                )
            )
            out.append(
                _row_finding(
                    "autoreset",
                    self._tally("autoreset"),
                    "rows right after an episode's end start from that episode's final "
                    "observation (autoreset steps recorded as transitions)",
                    "no autoreset step recorded as a transition",
                )
            )
        else:
            out.append(Finding("continuity", SKIPPED, self._skip_reason))
            out.append(Finding("autoreset", SKIPPED, self._skip_reason))
        if len(self.flags) == 2:
            out.append(
                _row_finding(
                    "both_flags",
                    self._tally("both_flags"),
                    "rows both terminated and truncated",
                    "no row is both terminated and truncated",
                )
            )
        else:
            out.append(Finding("both_flags", SKIPPED, "needs terminated and truncated"))
        for name, tally in sorted(self._finite.items()):
            out.append(_row_finding("finite", tally, f"NaN or inf in {name!r} at written rows", ""))
        if not self._finite:
            out.append(Finding("finite", PASSED, "no NaN or inf in written rows"))
        if unwritten:
            out.append(
                Finding(
                    "finite",
                    NOTE,
                    f"{unwritten} transitions at the end are NaN throughout: skrl's unwritten "
                    f"rows, left out of every statistic",
                    unwritten,
                )
            )
        for key in sorted(self._tallies):
            check, _, name = key.partition(":")
            if name:
                bounds = self.spaces[name]
                out.append(
                    _row_finding(
                        check,
                        self._tallies[key],
                        f"{name!r} outside {bounds.text}",
                        f"{name!r} within {bounds.text}",
                    )
                )
        return out


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
    for key, name in (("observation_space", "observations"), ("action_space", "actions")):
        description = metadata.get(key)
        if description is None or name not in specs:
            continue
        bounds = parse_space(description)
        if bounds is None:
            continue
        checked = True
        dtype, feature = specs[name]
        if not bounds.fits_shape(feature):
            problems.append(
                f"{key} is {bounds.text}, stored as rows of shape {bounds.shape}, but "
                f"{name!r} has feature shape {feature}"
            )
        if bounds.integral and np.dtype(dtype).kind not in "iub":
            problems.append(f"{key} is {bounds.text} but {name!r} holds {np.dtype(dtype).name}")
        elif bounds.kind == "Box" and bounds.dtype and np.dtype(bounds.dtype) != dtype:
            problems.append(f"{key} is {bounds.text} but {name!r} holds {np.dtype(dtype).name}")
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

    Reads only the datasets' shapes; the message lists the episode ids. Returns None when
    ``path`` is not a Minari file or folder.
    """
    import h5py

    from expcli.formats.layouts import is_minari_folder

    main = path / "data" / "main_data.hdf5" if (path / "data").is_dir() else path / "main_data.hdf5"
    target = main if path.is_dir() and is_minari_folder(path) else path
    if not target.is_file():  # a named pipe would block the open
        return None
    try:
        h5 = h5py.File(target, "r", locking=False)
    except (OSError, ValueError):
        return None
    bad: list[int] = []
    try:
        with h5:
            names = list(h5)
            episodes = [k for k in names if isinstance(k, str) and _EPISODE.fullmatch(k)]
            if not episodes or len(episodes) != len(names):
                return None
            for key in sorted(episodes, key=lambda k: int(k[8:])):
                group = h5[key]
                if not isinstance(group, h5py.Group):
                    bad.append(int(key[8:]))
                    continue
                observations = _lengths(group.get("observations"))
                actions = _lengths(group.get("actions"))
                steps = actions[0] if actions else None
                if steps is None or any(n != steps + 1 for n in observations):
                    bad.append(int(key[8:]))
    except Exception as e:  # h5py raises KeyError, RuntimeError, ... for damaged groups
        message = f"cannot read the episodes ({type(e).__name__}): the file is corrupt"
        return Finding("minari_episodes", FAILED, message, 1)
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


def _lengths(item: Any) -> list[int]:
    """First-dimension lengths of a dataset, or of every dataset in a group."""
    import h5py

    if isinstance(item, h5py.Dataset):
        return [int(item.shape[0])] if item.shape else [0]
    found: list[int] = []
    if isinstance(item, h5py.Group):
        item.visititems(
            lambda _, obj: (
                found.append(int(obj.shape[0]) if obj.shape else 0)
                if isinstance(obj, h5py.Dataset)
                else None
            )
        )
    return found


def _row_finding(check: str, tally: _Tally, failed: str, passed: str) -> Finding:
    if tally.count:
        return Finding(check, FAILED, failed, tally.count, tuple(tally.rows))
    return Finding(check, PASSED, passed)


def _listing(check: str, problems: list[str], checked: bool, passed: str) -> Finding:
    if problems:
        return Finding(check, FAILED, "; ".join(problems), len(problems))
    if not checked:
        return Finding(check, SKIPPED, "no spaces or counts in the metadata to check")
    return Finding(check, PASSED, passed)


def _derived(metadata: Mapping[str, Any]) -> bool:
    layout = metadata.get("layout")
    section = metadata.get(layout) if isinstance(layout, str) else None
    derived = section.get("derived") if isinstance(section, dict) else None
    return isinstance(derived, list) and "next_observations" in derived


def _any_feature(flags: np.ndarray) -> np.ndarray:
    return np.asarray(flags.reshape(*flags.shape[:2], -1).astype(bool).any(axis=2))


def _differs(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows ``(k, n)`` where two arrays ``(k, n, *feature)`` differ (NaN equals NaN)."""
    left, right = a.reshape(*a.shape[:2], -1), b.reshape(*b.shape[:2], -1)
    unequal = left != right
    if left.dtype.kind == "f" or right.dtype.kind == "f":
        unequal &= ~(np.isnan(left) & np.isnan(right))
    return np.asarray(unequal.any(axis=2))
