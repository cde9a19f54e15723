"""A plain function run as a clock process: each simulated learner runs the trainer's own
``train_step`` loop, whose strategy hooks block inside their transport calls; a generator
could not yield from there. So the function runs on a thread of its own that holds the turn
only while the clock has handed it over: :meth:`Coroutine.wait` gives the turn back with what
to wait for (a time, a meeting) and returns when the clock resumes this process. Exactly one
thread runs at any time, in the clock's order, so a run stays deterministic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from asrdist.simulate.clock import Process, Wait


class Cancelled(BaseException):
    """Raised inside a coroutine whose run was given up (not an Exception: nothing in a
    strategy's hooks should catch it)."""


class Coroutine:
    """``fn(self)`` on its own thread, stepped by the clock through :meth:`process`."""

    def __init__(self, fn: Callable[[Coroutine], None], name: str) -> None:
        self._fn = fn
        self._turn = threading.Semaphore(0)  # the thread may run
        self._back = threading.Semaphore(0)  # the clock may run
        self._request: Wait | None = None
        self._error: BaseException | None = None
        self._done = self._cancelled = False
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _main(self) -> None:
        self._turn.acquire()
        try:
            if not self._cancelled:
                self._fn(self)
        except Cancelled:
            pass
        except BaseException as exc:  # handed to the clock's thread, raised there
            self._error = exc
        self._done = True
        self._back.release()

    def wait(self, what: Wait) -> None:
        """From the coroutine's thread: give the clock ``what`` to wait for; returns when
        the clock resumes this process."""
        self._request = what
        self._back.release()
        self._turn.acquire()
        if self._cancelled:
            raise Cancelled

    def process(self) -> Process:
        """The generator the clock steps: each step runs the thread up to its next wait."""
        self._thread.start()
        while True:
            self._turn.release()
            self._back.acquire()
            if self._error is not None:
                raise self._error
            if self._done:
                return
            assert self._request is not None
            yield self._request

    def cancel(self) -> None:
        """End a coroutine still waiting (the run failed elsewhere): it raises
        :class:`Cancelled` where it waits, and its thread ends."""
        if self._done or not self._thread.is_alive():
            return
        self._cancelled = True
        self._turn.release()
        self._back.acquire()
