"""Structural checks of a dataset (``expcli inspect --check``), streamed with the statistics.

Statistics do not catch a broken dataset; these do. Each check yields a ``Finding`` that
names the rows it concerns as ``(row, env)`` pairs of the stored tensors:

* ``continuity``: ``next_observations[t] != observations[t + 1]`` inside an episode.
* ``autoreset``: the row right after an episode's end that starts from that episode's
  final observation (``next_observations`` at the end) and shows no step: reward 0 and
  neither flag, as Gymnasium's next-step autoreset reports the step it spends on the
  reset. A row that starts from the same observation but earns a reward or ends is a
  real step (a new Blackjack hand can be dealt as the last one ended), and in such data
  a row that shows no step may be one too: these rows fail only when they are more
  frequent than chance makes them in the data (``episode_starts``).
* ``both_flags``: rows both ``terminated`` and ``truncated`` (a note: Gymnasium's
  ``TimeLimit`` gives both when an episode terminates on its last allowed step).
* ``finite``: NaN or inf in written rows (skrl's NaN-filled unwritten rows are a note).
* ``action_space`` / ``observation_space``: values outside the spaces in the metadata.

Dict and Tuple spaces are stored one tensor per leaf: the observation pairs compare every
leaf, and each leaf is checked against its own space. The checks that read no rows
(``metadata``, ``d4rl_flags``, ``minari_episodes``) are in ``static_checks``; those that
compare whole episodes (``duplicates``, ``leakage``) in ``duplicates``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from expcli.spec import INFO_PREFIX
from expcli.summary.chronology import Chunk
from expcli.summary.episode_starts import EpisodeStarts
from expcli.summary.space_bounds import SpaceBounds, leaf_bounds

__all__ = ["FAILED", "NOTE", "PASSED", "SKIPPED", "SHOWN_ROWS", "Finding", "RowFinder"]

SHOWN_ROWS = 10
"""Rows listed per finding; ``count`` says how many there are in all."""

PASSED, FAILED, SKIPPED, NOTE = "passed", "failed", "skipped", "note"


@dataclass(frozen=True, slots=True)
class Finding:
    """The outcome of one check.

    Attributes:
        check: The check's name (see the module docstring).
        status: ``passed``, ``failed``, ``skipped`` (could not run) or ``note`` (worth
            knowing, not a failure).
        message: What was found, naming the tensor or metadata key.
        count: Rows concerned (or items, for metadata checks; episodes, for the
            fingerprint checks).
        rows: The first ``(row, env)`` pairs concerned, in chronological order.
        episodes: The first pairs of equal episodes, ``(index, env, index, env)``: an
            episode, then the one it equals (an earlier one, or one of the other dataset).
    """

    check: str
    status: str
    message: str
    count: int = 0
    rows: tuple[tuple[int, int], ...] = ()
    episodes: tuple[tuple[int, int, int, int], ...] = ()

    @property
    def failed(self) -> bool:
        """Whether the dataset failed this check."""
        return self.status == FAILED

    def to_json(self) -> dict[str, Any]:
        """One entry of the ``checks`` list of ``inspect --json``."""
        out: dict[str, Any] = {
            "check": self.check,
            "status": self.status,
            "message": self.message,
            "count": self.count,
            "rows": [list(pair) for pair in self.rows],
        }
        if self.episodes:
            keys = ("episode", "env", "same_as", "same_as_env")
            out["episodes"] = [dict(zip(keys, pair, strict=True)) for pair in self.episodes]
        return out


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
        # (observation leaf, its next_observations leaf): "observations" itself, or one
        # pair per leaf of a Dict or Tuple space ("observations/pos"...).
        both = _observation_pairs(self.specs)
        alike = [(a, b) for a, b in both if self.specs[a][1] == self.specs[b][1]]
        self.pairs = [] if derived else alike
        if derived:
            self._skip_reason = "next_observations are derived from observations by the reader"
        elif both and not alike:
            self._skip_reason = "observations and next_observations differ in feature shape"
        else:
            self._skip_reason = "needs observations and next_observations"
        self.flags = {"terminated", "truncated"} & self.specs.keys()
        self.spaces: dict[str, SpaceBounds] = {}
        for prefix in ("actions", "observations", "next_observations"):
            for name, _, bounds in leaf_bounds(dict(metadata), prefix):
                if bounds is not None and name in self.specs:
                    if bounds.fits_shape(self.specs[name][1]):
                        self.spaces[name] = bounds
        self._last_next = {
            following: np.zeros((num_envs, *self.specs[following][1]), self.specs[following][0])
            for _, following in self.pairs
        }
        self._has_prev = np.zeros(num_envs, dtype=bool)
        self._starts = EpisodeStarts(
            [name for name, _ in self.pairs], [following for _, following in self.pairs]
        )
        self._prev_done = np.zeros(num_envs, dtype=bool)
        self._prev_row = np.zeros(num_envs, dtype=np.int64)

    def update(self, chunk: Chunk, done: np.ndarray, nonfinite: set[str]) -> None:
        """Check one chunk.

        ``done`` is ``(rows, columns)``, ``nonfinite`` the tensors in which the statistics found NaN
        or inf in this chunk.
        """
        arrays = chunk.arrays
        if len(self.flags) == 2:
            both = _any_feature(arrays["terminated"]) & _any_feature(arrays["truncated"])
            self._tally("both_flags").add(chunk, both)
        for name in sorted(nonfinite):
            values = arrays.get(name)
            if values is None or values.dtype.kind != "f":
                continue
            flat = values.reshape(*values.shape[:2], -1)
            if name.startswith(INFO_PREFIX):  # NaN: the env did not report it that step
                bad = np.isinf(flat).any(axis=2)
            else:
                bad = ~np.isfinite(flat).all(axis=2)
            if bad.any():
                self._finite.setdefault(name, _Tally()).add(chunk, bad)
        for name, bounds in self.spaces.items():
            check = "action_space" if name.startswith("actions") else "observation_space"
            self._tally(f"{check}:{name}").add(chunk, bounds.outside(arrays[name]))
        if self.pairs:
            self._pairs(chunk, done)

    def _pairs(self, chunk: Chunk, done: np.ndarray) -> None:
        """Each row against the row before it in its column (the carry between chunks)."""
        columns = chunk.columns
        differs = np.zeros(done.shape, dtype=bool)
        for name, next_name in self.pairs:
            following = chunk.arrays[next_name]
            previous = np.concatenate([self._last_next[next_name][columns][None], following[:-1]])
            differs |= _differs(previous, chunk.arrays[name])
            self._last_next[next_name][columns] = following[-1]
        has_prev = np.ones(done.shape, dtype=bool)
        has_prev[0] = self._has_prev[columns]
        prev_done = np.concatenate([self._prev_done[columns][None], done[:-1]])
        jump = has_prev & ~prev_done & differs
        tally = self._tally("continuity")
        for j in np.flatnonzero(jump[0]).tolist():  # the pair's earlier row: an earlier chunk
            tally.count += 1
            if len(tally.rows) < SHOWN_ROWS:
                tally.rows.append((int(self._prev_row[columns[j]]), int(columns[j])))
        tally.add(chunk, jump[1:])  # row i of jump[1:] is the pair's earlier row, start + i
        # An autoreset step recorded as a transition starts where the episode ended and
        # shows no step: no reward, no end (a real step from that observation may).
        no_step = ~done
        rewards = chunk.arrays.get("rewards")
        if rewards is not None:
            no_step &= ~_any_feature(rewards != 0)
        after_end = has_prev & prev_done
        self._tally("autoreset").add(chunk, after_end & ~differs & no_step)
        self._starts.update(chunk.arrays, after_end, done, ~differs, no_step)
        self._has_prev[columns] = True
        self._prev_done[columns] = done[-1]
        self._prev_row[columns] = chunk.stop - 1

    def _autoreset_finding(self) -> Finding:
        """The autoreset finding: fails when stepless rows follow episode ends beyond chance.

        That is, rows that show no step start where the last episode ended more often than chance
        does in this data (see ``episode_starts``).
        """
        tally = self._tally("autoreset")
        if tally.count and self._starts.by_chance(tally.count):
            return Finding(
                "autoreset",
                PASSED,
                f"no autoreset step recorded as a transition ({tally.count} rows without "
                f"reward or end start from the last episode's final observation, as often "
                f"as chance does here: {self._starts.chance():.2%} of first observations "
                "equal another episode's final one)",
            )
        return _row_finding(
            "autoreset",
            tally,
            "rows right after an episode's end start from that episode's final "
            "observation with reward 0 and no end (autoreset steps recorded as "
            "transitions)",
            "no autoreset step recorded as a transition",
        )

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
            out.append(self._autoreset_finding())
        else:
            out.append(Finding("continuity", SKIPPED, self._skip_reason))
            out.append(Finding("autoreset", SKIPPED, self._skip_reason))
        if len(self.flags) == 2:
            both = self._tally("both_flags")
            if both.count:  # valid: Gymnasium's TimeLimit when the last allowed step terminates
                message = (
                    "rows both terminated and truncated (Gymnasium's TimeLimit gives both when "
                    "an episode terminates on its last allowed step)"
                )
                out.append(Finding("both_flags", NOTE, message, both.count, tuple(both.rows)))
            else:
                out.append(Finding("both_flags", PASSED, "no row is both terminated and truncated"))
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


def _observation_pairs(specs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(observations leaf, next_observations leaf)`` for every leaf stored both ways."""
    return [
        (name, "next_" + name)
        for name in sorted(specs)
        if (name == "observations" or name.startswith("observations/")) and "next_" + name in specs
    ]


def _row_finding(check: str, tally: _Tally, failed: str, passed: str) -> Finding:
    if tally.count:
        return Finding(check, FAILED, failed, tally.count, tuple(tally.rows))
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
