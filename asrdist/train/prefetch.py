"""Make the next batch on a background thread while the current one trains.

Exactly one batch is in flight, produced by a single thread in order, so the batch sequence
is the same as without prefetching. With ``background=False`` batches are made inline, when
asked for: right for CPU training, where every core already computes and a data thread
would only take time from it. ``pending()`` waits for the batch in flight and returns
the batches made but not yet taken: a checkpoint stores them with the stream's state, and a
resumed run hands them back through ``ready`` before producing new ones.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")


class Prefetcher(Generic[T]):
    def __init__(
        self, produce: Callable[[], T], count: int, ready: Iterable[T] = (),
        background: bool = True,
    ) -> None:
        """Deliver the ``ready`` items, then ``count`` items of ``produce()``."""
        self._produce = produce
        self._remaining = count
        self._ready: deque[T] = deque(ready)
        self._pool = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="asrdist-data")
            if background else None
        )
        self._future: Future[T] | None = None
        self._schedule()

    def _schedule(self) -> None:
        if self._pool is not None and self._future is None and self._remaining > 0:
            self._remaining -= 1
            self._future = self._pool.submit(self._produce)

    def get(self) -> T:
        if not self._ready and self._pool is None:
            self._remaining -= 1
            return self._produce()
        if not self._ready:
            self.pending()
        item = self._ready.popleft()
        self._schedule()
        return item

    def pending(self) -> list[T]:
        """Items made but not taken, after the one in flight completes (errors re-raised)."""
        if self._future is not None:
            future, self._future = self._future, None
            self._ready.append(future.result())
        return list(self._ready)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
