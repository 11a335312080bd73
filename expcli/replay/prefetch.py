"""Prefetcher: draws the next batches of a replay buffer in a background thread.

The batches come in the order they would without prefetching, and are the same ones: each
draw records the state it started from (generator, sampler, storage revision). A batch
drawn before the storage changed, or before priorities were updated, is thrown away with
those drawn after it, the state goes back to where it was before the first of them, and
the batch is drawn again; so the batches never depend on the thread's timing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["Prefetcher"]

T = TypeVar("T")


@dataclass
class _Drawn(Generic[T]):
    snapshot: Any
    revision: Hashable
    result: T | None
    error: BaseException | None


class Prefetcher(Generic[T]):
    """Keeps ``depth`` draws of ``draw()`` running ahead in one worker thread.

    Args:
        depth: Number of draws kept ahead.
        draw: Makes one batch (runs in the worker).
        snapshot: The state ``draw`` starts from; ``restore`` goes back to it.
        restore: Returns to a snapshot.
        revision: The storage's current revision.
    """

    def __init__(
        self,
        depth: int,
        draw: Callable[[], T],
        snapshot: Callable[[], Any],
        restore: Callable[[Any], None],
        revision: Callable[[], Hashable],
    ) -> None:
        self.depth = depth
        self._draw, self._snapshot, self._restore, self._revision = (
            draw,
            snapshot,
            restore,
            revision,
        )
        self._pool: ThreadPoolExecutor | None = None
        self._queue: deque[Future[_Drawn[T]]] = deque()

    def next(self) -> T:
        """The next batch, the one ``draw()`` would give now."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="expcli-prefetch")
        while len(self._queue) < self.depth:
            self._queue.append(self._pool.submit(self._job))
        drawn = self._queue[0].result()
        if drawn.error is not None or drawn.revision != self._revision():
            # stale (the data changed since) or failed: draw it again, here and now
            self.settle()
            return self._draw()
        self._queue.popleft()
        self._queue.append(self._pool.submit(self._job))
        assert drawn.result is not None
        return drawn.result

    def settle(self) -> None:
        """Wait for the worker, drop what it drew ahead and restore the state before it."""
        first: _Drawn[T] | None = None
        while self._queue:
            drawn = self._queue.popleft().result()
            first = first or drawn
        if first is not None:
            self._restore(first.snapshot)

    def close(self) -> None:
        """Settle and stop the worker thread."""
        self.settle()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _job(self) -> _Drawn[T]:
        snapshot, revision = self._snapshot(), self._revision()
        try:
            return _Drawn(snapshot, revision, self._draw(), None)
        except Exception as e:  # handed to the caller, who draws again and sees it raise
            return _Drawn(snapshot, revision, None, e)
