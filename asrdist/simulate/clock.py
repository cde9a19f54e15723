"""A discrete-event clock whose processes are generators: the simulated learners.

A process yields what it waits for, and the clock resumes it when that happens:

- a float: the simulated time to resume at (computing, or an exchange to finish);
- a :class:`Meeting`: a collective of a fixed set of processes (an allreduce, a broadcast);
  the last one to arrive runs the meeting's action, and all resume ``cost_s`` later (or as
  many seconds as the action returns: a broadcast's cost may depend on what it carries);
- a :class:`Later`: a time another process decides (:meth:`Clock.settle`), such as the end
  of a collective started without waiting whose last member has not started it yet.

Events at the same time run in the order they were scheduled, so a run is deterministic. Each
process's time spent waiting (at a meeting, or for a time later than it asked to compute until)
is added up in :attr:`Clock.waited`.

A lost learner (:mod:`asrdist.simulate.run`) never reaches its meetings: :meth:`Clock.fail`
releases those who wait at one, marked ``failed`` (on processes their collective raises), and
:meth:`Clock.halt` ends a run that cannot go on (a fail-stop strategy's) with processes still
waiting, which :meth:`Clock.run` then leaves as they are.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Union

Wait = Union[float, "Meeting", "Later"]
Process = Generator[Wait, None, None]


@dataclass
class Meeting:
    """A collective of ``members`` (process ids); ``action`` runs once, when all are there.
    Each member may leave what it brings in ``payloads`` (its tensors) before it arrives, and
    the action what all of them get back in ``result``."""

    members: tuple[int, ...]
    cost_s: float
    action: Callable[[], float | None] | None = None
    arrived: dict[int, float] = field(default_factory=dict)
    payloads: dict[int, Any] = field(default_factory=dict)
    result: Any = None
    failed: bool = False  # a member was lost: it will never be held


@dataclass
class Later:
    """A time not known yet: the processes waiting on it resume once :meth:`Clock.settle`
    sets it (at it, or at once if it is past), their wait counted from their arrival."""

    time: float | None = None
    waiting: list[tuple[int, float]] = field(default_factory=list)  # (process, since)


class Clock:
    """Runs the processes in simulated-time order."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._procs: dict[int, Process] = {}
        self.waited: dict[int, float] = {}
        self.halted = False

    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at simulated time ``t`` (not before now)."""
        heapq.heappush(self._queue, (max(t, self.now), next(self._seq), fn))

    def spawn(self, pid: int, proc: Process) -> None:
        """Start process ``pid`` now."""
        self._procs[pid] = proc
        self.waited[pid] = 0.0
        self.at(self.now, lambda: self._step(pid))

    def wait_until(self, pid: int, t: float) -> float:
        """For a process that must wait for an event at ``t`` (an exchange): counts the wait
        and returns the time to yield."""
        if t > self.now:
            self.waited[pid] += t - self.now
        return t

    def _step(self, pid: int) -> None:
        try:
            what = next(self._procs[pid])
        except StopIteration:
            del self._procs[pid]
            return
        if isinstance(what, Meeting):
            self._arrive(pid, what)
        elif isinstance(what, Later):
            if what.time is None:
                what.waiting.append((pid, self.now))
            else:
                self._resume(pid, self.now, what.time)
        else:
            self.at(float(what), lambda: self._step(pid))

    def settle(self, later: Later, t: float) -> None:
        """``later`` is at ``t``: resume the processes waiting on it then."""
        later.time = t
        for pid, since in later.waiting:
            self._resume(pid, since, t)
        later.waiting.clear()

    def _resume(self, pid: int, since: float, t: float) -> None:
        t = max(t, self.now)
        self.waited[pid] += t - since
        self.at(t, lambda: self._step(pid))

    def _arrive(self, pid: int, meeting: Meeting) -> None:
        meeting.arrived[pid] = self.now
        if meeting.failed:  # a member is lost: back at once, to see it failed
            self.at(self.now, lambda: self._step(pid))
            return
        if len(meeting.arrived) < len(meeting.members):
            return
        cost = meeting.action() if meeting.action is not None else None
        done = self.now + (meeting.cost_s if cost is None else cost)
        for member, t in meeting.arrived.items():
            self.waited[member] += done - t
            self.at(done, lambda m=member: self._step(m))

    def fail(self, meeting: Meeting) -> None:
        """``meeting`` will never be held (a member is lost): those waiting at it resume now
        and see it ``failed``, as will any who arrive later."""
        meeting.failed = True
        for member, t in meeting.arrived.items():
            self.waited[member] += self.now - t
            self.at(self.now, lambda m=member: self._step(m))

    def halt(self) -> None:
        """End the run now (a fail-stop run lost a learner): :meth:`run` returns with the
        processes still waiting left as they are."""
        self.halted = True

    def run(self) -> None:
        """Run until every process has finished (or the run is halted)."""
        while self._queue and not self.halted:
            t, _, fn = heapq.heappop(self._queue)
            self.now = t
            fn()
        if self._procs and not self.halted:
            raise RuntimeError(f"processes {sorted(self._procs)} wait on a meeting that never "
                               "completes")
