"""Episode order in a Parquet file: which stored transition each file row holds, both ways.

A file written episode by episode holds each episode's transitions one after another,
``frame_index`` 0, 1, 2... (a folder's shard: going on from the shard before), episodes in
the order they start (their ``episode_index``), then the rows never written, as the
chronological file held them. The writer finds the episodes from the flags alone
(``find_episodes``: memory grows with episodes, never with rows) and gives each stored
transition its file row (``Episodes.rows_of``) and each file row its transition
(``Episodes.positions``) and bookkeeping (``Episodes.bookkeeping``).

A transition is named by its chronological position ``i`` among the file's transitions
(``0..count``): the cell ``(start + i) % cells`` of the ``(T, N)`` tensors, as in a file
written step by step. An episode lies in one env column on consecutive rows, so its ``j``-th
transition is at position ``first + j * N``.

The reader places the rows from the file's ``row`` and ``env`` columns (``EpisodeCells``):
runs of file rows, one env's consecutive tensor rows each, as many as the episodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from expcli.errors import FormatError
from expcli.formats._parquet_columns import Carry, positions

__all__ = ["EpisodeCells", "Episodes", "find_episodes", "timestamps"]


def timestamps(frames: np.ndarray, fps: float) -> np.ndarray:
    """``frame_index / fps`` as float32, -1 where the frame is -1 (a row never written)."""
    return np.where(frames >= 0, frames / fps, -1.0).astype(np.float32)


@dataclass(frozen=True, slots=True)
class Episodes:
    """The episodes among a file's stored transitions, in file order.

    Attributes:
        numbers: Each episode's ``episode_index``, increasing.
        firsts: The chronological position of each one's first transition.
        frames: The ``frame_index`` of each one's first transition in the file.
        offsets: The file row where each begins, and the written transitions' count last.
        lasts: The chronological position of each one's last transition.
        envs: N.
        latest: The running maximum of ``lasts``: the episodes up to each are all over
            once the reading passes it (``complete``).
    """

    numbers: np.ndarray
    firsts: np.ndarray
    frames: np.ndarray
    offsets: np.ndarray
    lasts: np.ndarray
    envs: int
    latest: np.ndarray

    @property
    def written(self) -> int:
        """The written transitions: the file rows episodes hold."""
        return int(self.offsets[-1])

    def by_env(self, start: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per env column, its episodes' first positions (increasing) and their slots.

        ``start``: the first transition's flat cell (position ``i`` is of env
        ``(start + i) % N``).
        """
        envs = max(self.envs, 1)
        column = (start + self.firsts) % envs
        order = np.argsort(column, kind="stable")  # in each env, in the order they start
        cuts = np.searchsorted(column[order], np.arange(envs + 1))
        return [
            (self.firsts[order[lo:hi]], order[lo:hi])
            for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)
        ]

    def rows_at(
        self, first: int, stop: int, start: int, per_env: list[tuple[np.ndarray, np.ndarray]]
    ) -> np.ndarray:
        """The file rows of chronological positions ``first..stop``.

        Each env's positions one in N run through its episodes in order (``by_env``): an
        episode's are consecutive file rows. A position past the written ones (never
        written) keeps its number.
        """
        envs = max(self.envs, 1)
        out = np.arange(first, stop, dtype=np.int64)
        written = min(stop, self.written)
        for env, (firsts, slots) in enumerate(per_env):
            at = first + (env - start - first) % envs  # the env's first position here
            count = len(range(at, written, envs))
            if count <= 0:
                continue
            low = int(np.searchsorted(firsts, at, side="right")) - 1  # the episode it is in
            high = int(np.searchsorted(firsts, at + (count - 1) * envs, side="right"))
            begins = np.maximum(0, -(-(firsts[low:high] - at) // envs))  # each one's first j
            begins[0] = 0
            held = slots[low:high]
            base = self.offsets[held] + (at - self.firsts[held]) // envs
            lengths = np.diff(np.append(begins, count))
            rows = np.repeat(base, lengths) + np.arange(count, dtype=np.int64)
            out[at - first : at - first + count * envs : envs] = rows
        return out

    def positions(self, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """The chronological position of file rows ``first..stop``, and each one's episode slot.

        The slot is the episode's place in ``numbers`` (-1: a row never written).
        """
        rows = np.arange(first, stop, dtype=np.int64)
        k = np.full(stop - first, -1, np.int64)
        written = min(stop, self.written)
        if written > first:  # the episodes the rows lie in, each as many times as it has rows
            low, high = np.searchsorted(self.offsets, [first, written - 1], side="right") - 1
            slots = np.arange(low, high + 1)
            counts = np.minimum(self.offsets[slots + 1], written)
            counts -= np.maximum(self.offsets[slots], first)
            k[: written - first] = np.repeat(slots, counts)
        safe = np.maximum(k, 0)
        at = _pick(self.firsts, safe) + (rows - self.offsets[safe]) * self.envs
        return np.where(k >= 0, at, rows), k

    def bookkeeping(
        self, first: int, stop: int, where: tuple[int, int], carry: Carry, fps: float
    ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The bookkeeping columns of file rows ``first..stop``, and their flat cells.

        ``where``: the first transition's flat cell and the tensors' cells.
        """
        start, cells = where
        at, k = self.positions(first, stop)
        safe = np.maximum(k, 0)
        flat = (start + at) % max(cells, 1)
        envs = max(self.envs, 1)
        frame = np.where(
            k >= 0, _pick(self.frames, safe) + np.arange(first, stop) - self.offsets[safe], -1
        )
        book = {
            "index": carry.index + at,
            "episode_index": np.where(k >= 0, _pick(self.numbers, safe), -1).astype(np.int64),
            "frame_index": frame.astype(np.int64),
            "env": (flat % envs).astype(np.int32),
            "row": np.asarray(carry.row + flat // envs, np.int64),
            "timestamp": timestamps(frame, fps),
        }
        return book, flat

    def complete(self, seen: int) -> int:
        """The file rows before the first episode not over once ``seen`` transitions were read.

        Rows never written follow the written ones, each at its own position: complete
        once the episodes all are and it is seen.
        """
        over = int(np.searchsorted(self.latest, seen))  # episodes 0..over-1 are all over
        return int(self.offsets[over]) if over < len(self.lasts) else max(self.written, seen)


def _pick(values: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``values[at]``, zeros where there are no values (a file of no written transition)."""
    return values[at] if len(values) else np.zeros(len(at), np.int64)


def find_episodes(
    chunks: Iterable[tuple[int, int]],
    done_of: Callable[[np.ndarray, int], np.ndarray],
    where: tuple[int, int, int],
    carry: Carry,
) -> tuple[Episodes, Carry]:
    """The episodes of the written transitions (flags read a chunk at a time), the carry after.

    Numbered and carried as ``transition_chunk`` numbers them, but found from the flags
    alone: a transition starts an episode where its env's transition before it ended one.

    Args:
        chunks: Chronological positions ``(first, stop)`` covering the written ones in order.
        done_of: The done flag of each of the flat cells given, the first ``n`` written.
        where: The first transition's flat cell, the tensors' cells, N.
        carry: Where the earlier shards left the bookkeeping (``Carry.start``: none).
    """
    start, cells, envs = where
    found: dict[str, list[np.ndarray]] = {k: [] for k in ("number", "first", "frame", "last", "n")}
    for first, stop in chunks:
        done = np.asarray(done_of(positions(start + first, stop - first, cells), stop - first))
        pieces, carry = _chunk_episodes(first, done, (start + first) % max(envs, 1), carry)
        for key, values in pieces.items():
            found[key].append(values)
    if not found["number"]:
        none = np.zeros(0, np.int64)
        return Episodes(none, none, none, np.zeros(1, np.int64), none, envs, none), carry
    number = np.concatenate(found["number"])
    order = np.argsort(number, kind="stable")  # chunks in time: an episode's first chunk first
    number = number[order]
    begins = np.flatnonzero(np.concatenate([[True], number[1:] != number[:-1]]))
    lengths = np.add.reduceat(np.concatenate(found["n"])[order], begins)
    lasts = np.maximum.reduceat(np.concatenate(found["last"])[order], begins)
    return Episodes(
        number[begins],
        np.concatenate(found["first"])[order][begins],
        np.concatenate(found["frame"])[order][begins],
        np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        lasts,
        envs,
        np.maximum.accumulate(lasts),
    ), carry


def _chunk_episodes(
    first: int, done: np.ndarray, phase: int, carry: Carry
) -> tuple[dict[str, np.ndarray], Carry]:
    """The pieces of episodes among chronological positions ``first..first + len(done)``.

    One piece per episode the chunk holds part of: its number, first and last position,
    the frame index of its first transition here, its transitions here. ``phase``: the env
    of position ``first`` (position ``first + j`` is of env ``(phase + j) % N``).
    """
    n, envs = len(done), max(len(carry.ended), 1)
    env = (phase + np.arange(n, dtype=np.int64)) % envs
    head = min(envs, n)  # each env's first transition in the chunk
    begins = np.empty(n, bool)
    begins[head:] = done[: n - head]
    begins[:head] = carry.ended[env[:head]]
    opens = begins.copy()
    opens[:head] = True  # a piece: an episode begun here, or one going on from before
    at = np.flatnonzero(opens)
    of = env[at]
    new = begins[at]
    number = np.where(new, carry.next_episode + np.cumsum(new) - 1, carry.episode[of])
    frame = np.where(new, 0, carry.frame[of] + 1)
    # a piece ends before the next piece of its env, else at its env's last transition here
    order = np.argsort(of, kind="stable")
    ordered = of[order]
    last_here = np.ones(len(at), bool)
    last_here[:-1] = ordered[1:] != ordered[:-1]
    offset = (ordered - phase) % envs
    following = np.append(at[order][1:], 0) - envs  # the next piece of the env, less N
    end = np.where(last_here, offset + (n - 1 - offset) // envs * envs, following)
    last = np.empty(len(at), np.int64)
    last[order] = end
    count = (last - at) // envs + 1
    closing = order[last_here]  # each env's last piece: what the carry holds after
    columns = of[closing]
    episode, frames, ended = carry.episode.copy(), carry.frame.copy(), carry.ended.copy()
    episode[columns] = number[closing]
    frames[columns] = frame[closing] + count[closing] - 1
    ended[columns] = done[last[closing]]
    after = Carry(
        carry.index + n, carry.row, carry.next_episode + int(new.sum()), episode, frames, ended
    )
    pieces = {"number": number, "first": first + at, "frame": frame, "last": first + last}
    return {**pieces, "n": count}, after


@dataclass(frozen=True, slots=True)
class EpisodeCells:
    """Where each cell of the ``(T, N)`` tensors lies among the file rows of an episode file.

    Per env column, runs of its consecutive tensor rows held by consecutive file rows:
    their first tensor row (increasing), their end, and their first file row.
    """

    begins: list[np.ndarray]
    ends: list[np.ndarray]
    files: list[np.ndarray]

    def cells(self, first: int, stop: int) -> np.ndarray:
        """The file row of each cell of tensor rows ``first..stop``, ``(stop - first, N)``.

        -1 where the file holds no row for the cell (a row never written, left out).
        """
        t = np.arange(first, stop, dtype=np.int64)
        envs = range(len(self.begins))
        out = np.full((stop - first, len(envs)), -1, np.int64)
        for at, env in enumerate(envs):
            begins, ends, files = self.begins[env], self.ends[env], self.files[env]
            k = np.searchsorted(begins, t, side="right") - 1
            safe = np.maximum(k, 0)
            inside = (k >= 0) & (t < ends[safe]) if len(begins) else np.zeros(len(t), bool)
            if len(begins):
                out[inside, at] = (files[safe] + t - begins[safe])[inside]
        return out

    def rows_of(self, flat: np.ndarray) -> np.ndarray:
        """The file row of each cell at flat ``t * N + n`` index ``flat`` (-1: not stored)."""
        envs = len(self.begins)
        t, columns = np.divmod(flat.astype(np.int64, copy=False), max(envs, 1))
        out = np.full(len(flat), -1, np.int64)
        for env in np.unique(columns):
            mine = np.flatnonzero(columns == env)
            begins, ends, files = self.begins[env], self.ends[env], self.files[env]
            if not len(begins):
                continue
            k = np.searchsorted(begins, t[mine], side="right") - 1
            safe = np.maximum(k, 0)
            inside = (k >= 0) & (t[mine] < ends[safe])
            out[mine[inside]] = (files[safe] + t[mine] - begins[safe])[inside]
        return out

    @classmethod
    def from_columns(
        cls,
        groups: Iterable[tuple[int, np.ndarray, np.ndarray]],
        shape: tuple[int, int],
        expected: np.ndarray,
        path: Path,
    ) -> EpisodeCells:
        """The runs of a file's ``row`` (less its first row) and ``env`` columns, a group at a time.

        Args:
            groups: Each row group's first file row, its tensor rows and its envs.
            shape: ``(T, N)``.
            expected: Per env column, the rows the file holds of it (its first rows).
            path: For messages.

        Raises:
            FormatError: The columns do not place each stored cell once, inside the tensors.
        """
        rows, envs = shape
        parts: dict[str, list[np.ndarray]] = {"file": [], "env": [], "begin": [], "n": []}
        for first, row, env in groups:
            if not len(row):
                continue
            if (row < 0).any() or (row >= rows).any() or (env < 0).any() or (env >= envs).any():
                raise FormatError(
                    f"its row and env columns point outside its {rows:,} rows of {envs:,} envs "
                    f"in row group from file row {first:,}",
                    path=path,
                    key="row",
                )
            new = np.ones(len(row), bool)  # a group's runs start anew: none is merged
            new[1:] = (env[1:] != env[:-1]) | (row[1:] != row[:-1] + 1)
            at = np.flatnonzero(new)
            parts["file"].append(first + at)
            parts["env"].append(env[at].astype(np.int64))
            parts["begin"].append(row[at])
            parts["n"].append(np.diff(np.append(at, len(row))))
        cat = {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in parts.items()}
        order = np.lexsort((cat["begin"], cat["env"]))
        env_of = cat["env"][order]
        cuts = np.searchsorted(env_of, np.arange(envs + 1))
        out = cls([], [], [])
        for column in range(envs):
            take = order[cuts[column] : cuts[column + 1]]
            begins, lengths = cat["begin"][take], cat["n"][take]
            ends = begins + lengths
            if int(lengths.sum()) != int(expected[column]) or (
                len(begins) and (begins[0] != 0 or (begins[1:] != ends[:-1]).any())
            ):
                raise FormatError(
                    f"its row and env columns do not hold each of env {column}'s "
                    f"{int(expected[column]):,} stored rows once",
                    path=path,
                    key="row",
                )
            out.begins.append(begins)
            out.ends.append(ends)
            out.files.append(cat["file"][take])
        return out
