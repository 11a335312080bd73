"""The checks over episode fingerprints: repeated episodes, and episodes two datasets share.

* ``duplicates``: complete episodes whose data repeats an earlier complete episode bit for
  bit (``fingerprints``), as a merge that took a file twice, or two overlapping parts, make
  them. Copies weigh their episodes twice in training and in evaluation: they fail.
* ``leakage``: episodes of the dataset that are also in another one, bit for bit (a
  validation split sharing episodes with the training split). Every episode counts, the
  incomplete ones too: the same rows in both files leak whatever their ends.

Chance repeats episodes as well where an env and its policy have few outcomes: Blackjack
deals the same hand to the same end again, FrozenLake's agent walks into the same hole.
Such data shows it: distinct episodes in it end alike (the same final next observation,
``end``), and there repeats are a note, not a failure. Where no two distinct episodes end
alike (continuous states; Atari, whose episodes all begin alike but end apart), a repeat is
taken for a copy. A small dataset of such an env (a few dozen Blackjack hands) may not show
it yet, and fails.
"""

from __future__ import annotations

import numpy as np

from expcli.summary.checks import FAILED, NOTE, PASSED, SHOWN_ROWS, SKIPPED, Finding

__all__ = ["duplicate_finding", "leakage_finding"]


def duplicate_finding(records: np.ndarray) -> Finding:
    """The ``duplicates`` finding of a dataset's fingerprints (``FINGERPRINT_DTYPE``)."""
    complete = records[records["complete"]]
    if not len(complete):
        return Finding("duplicates", SKIPPED, "no complete episodes to compare")
    later, earlier = _repeats(complete["digest"])
    if not len(later):
        message = f"no complete episode repeats another ({len(complete):,} compared)"
        return Finding("duplicates", PASSED, message)
    message = (
        f"{len(later):,} of {len(complete):,} complete episodes repeat an earlier one bit for bit"
    )
    return _found("duplicates", message, complete[later], complete[earlier], complete)


def leakage_finding(records: np.ndarray, others: np.ndarray, other: str) -> Finding:
    """The ``leakage`` finding: the episodes of ``records`` that ``others`` (of ``other``) has."""
    order = np.argsort(others["digest"], kind="stable")
    theirs = others["digest"][order]
    at = np.minimum(np.searchsorted(theirs, records["digest"]), max(len(theirs) - 1, 0))
    shared = np.flatnonzero(theirs[at] == records["digest"]) if len(theirs) else at[:0]
    if not len(shared):
        message = (
            f"no episode is also in {other} ({len(records):,} and {len(others):,} episodes "
            "compared)"
        )
        return Finding("leakage", PASSED, message)
    message = (
        f"{len(shared):,} of {len(records):,} episodes are also in {other} bit for bit "
        f"(of its {len(others):,})"
    )
    mine, same = records[shared], others[order[at[shared]]]
    return _found("leakage", message, mine, same, records, others)


def _repeats(digests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the digests equal to an earlier one, and of the earliest they equal."""
    order = np.argsort(digests, kind="stable")
    ordered = digests[order]
    repeat = np.zeros(len(order), dtype=bool)
    repeat[1:] = ordered[1:] == ordered[:-1]
    group = np.maximum.accumulate(np.where(repeat, 0, np.arange(len(order))))
    later, earlier = order[repeat], order[group[repeat]]
    by = np.argsort(later, kind="stable")
    return later[by], earlier[by]


def _found(
    check: str, message: str, found: np.ndarray, same: np.ndarray, *compared: np.ndarray
) -> Finding:
    """Equal episodes ``found[i] == same[i]``: a failure, or a note where chance repeats them."""
    pairs = tuple(
        (int(a["index"]), int(a["env"]), int(b["index"]), int(b["env"]))
        for a, b in zip(found[:SHOWN_ROWS], same[:SHOWN_ROWS], strict=True)
    )
    alike = _alike(*compared)
    if not alike:
        return Finding(check, FAILED, message, len(found), episodes=pairs)
    message += (
        f"; {alike:,} distinct complete episodes end as another one does, so chance can "
        "repeat episodes here"
    )
    return Finding(check, NOTE, message, len(found), episodes=pairs)


def _alike(*records: np.ndarray) -> int:
    """How many distinct complete episodes end as another distinct one does."""
    complete = np.concatenate([r[r["complete"]] for r in records])
    order = np.lexsort((complete["digest"], complete["end"]))
    ends, digests = complete["end"][order], complete["digest"][order]
    distinct = np.ones(len(order), dtype=bool)
    distinct[1:] = (ends[1:] != ends[:-1]) | (digests[1:] != digests[:-1])
    _, counts = np.unique(ends[distinct], return_counts=True)
    return int(counts[counts > 1].sum())
