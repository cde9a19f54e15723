"""How long this process was stopped (SIGSTOP, a suspended job), seen from inside it.

A thread that does nothing but sleep in short ticks: a stop almost always catches it asleep, and
the tick it wakes from overran by the time the process was stopped. The heartbeat thread cannot
tell this itself: a stop that catches it in a store call (often, on a loaded host) leaves no
overrun of its own waits, and the woken learner would blame the store for its own absence.
"""

from __future__ import annotations

import threading
import time

TICK_S = 0.1


class StopWatch:
    """The longest stop of this process since it was made, seconds (:meth:`stopped_for`)."""

    def __init__(self) -> None:
        self._longest = 0.0
        self._asleep_since = time.monotonic()
        self._end = threading.Event()
        threading.Thread(target=self._run, name="asrdist-stopwatch", daemon=True).start()

    def _run(self) -> None:
        while True:
            self._asleep_since = time.monotonic()
            ended = self._end.wait(TICK_S)
            overran = time.monotonic() - self._asleep_since - TICK_S
            self._longest = max(self._longest, overran)  # a stop ended by close() counts too
            if ended:
                return

    def stopped_for(self) -> float:
        """The longest stop so far, including one the thread has not woken from yet (another
        thread of the woken process asked first)."""
        if self._end.is_set():
            return self._longest
        return max(self._longest, time.monotonic() - self._asleep_since - TICK_S)

    def close(self) -> None:
        self._end.set()
