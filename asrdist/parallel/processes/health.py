"""Liveness of all learners: heartbeats through the rendezvous store, and fail-stop.

Every learner's heartbeat thread bumps its own counter in torch.distributed's TCP store and
watches everyone else's. A learner whose counter stops moving for ``timeout_s`` died or was
stopped; the store itself becoming unreachable means learner 0 (which hosts it) is gone, or in
an elastic run the store's own process (:mod:`asrdist.parallel.processes.storehost`). Either
way the watcher prints one line naming the lost learner and ends its own process (fail-stop), so
the whole job ends within the timeout whatever its main thread is blocked in; checkpoints are
written atomically, so nothing half-written is left. A learner that fails on its own (bad input,
a full disk) prints its error first and posts it (:func:`fail`); the others' watchers read it at
their next heartbeat and end too, naming it. A learner that is alive but stuck is caught
by the timeouts of the exchanges and collectives that wait on it, and, at the end, by
:meth:`Liveness.wait_all_finished`, which also watches each learner's progress counter.

Elastic runs (a :class:`~asrdist.parallel.processes.membership.Membership`): a learner lost in any
of these ways is dropped instead (one line naming it and the step it had reached), another's
failure report ends nobody (that learner ends and is dropped), and a learner that finds itself
dropped (it froze past the timeout) ends, learner 0 as any other, saying so and naming the
learners going on, and drops nobody: its own waits ran out while it was stopped, not theirs.
Woken only after the others have finished, it finds the store gone: the liveness thread measured
how long it was stopped, so it says it was dropped rather than that the store ended. A hadpsgd
node member whose node lost a learner leaves with its node, and says the run goes on. Only the
store's loss still ends everyone.

A failure report, a learner's pid and its "finished" flag are signed with the run's secret
(:mod:`asrdist.parallel.processes.signed`): a forged one in the store is refused and named in the
log.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import NoReturn

import torch.distributed as dist

from asrdist.errors import first_line
from asrdist.parallel.processes import storehost
from asrdist.parallel.processes.membership import Membership
from asrdist.parallel.processes.signed import SignedStore
from asrdist.parallel.processes.stopwatch import StopWatch
from asrdist.progress import say

log = logging.getLogger(__name__)

_PREFIX = "asrdist/live/"


_reports: SignedStore | None = None  # where learners post why they abort (set by Liveness)
_liveness: Liveness | None = None  # this learner's (for lost_store: was it stopped?)


def _first_report(rank: int, message: str) -> str | None:
    """Post this learner's reason; return the first reason any learner posted, if another's.

    Runs in a helper thread given one second at most: the store may be gone or hung.
    """
    found: list[str] = []

    def post() -> None:
        assert _reports is not None
        try:
            mine = f"learner {rank}: {message}"
            first = _reports.claim("first", mine)
            if first != mine:
                found.append(first)
        except (RuntimeError, OSError):  # the store went with learner 0: nothing to add
            pass

    t = threading.Thread(target=post, daemon=True)
    t.start()
    t.join(1.0)
    return found[0] if found else None


def other_report(rank: int) -> str | None:
    """The first failure another learner posted, if any (one second at most: the store may be
    gone): an error here that follows it is its consequence, not a cause of its own."""
    found: list[str] = []

    def read() -> None:
        assert _reports is not None
        try:
            first = _reports.get("first")  # None: none, or forged (refused)
            if first is not None:
                found.append(first)
        except (RuntimeError, OSError):  # the store went with learner 0
            pass

    if _reports is not None:
        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(1.0)
    return found[0] if found and not found[0].startswith(f"learner {rank}:") else None


def fail(rank: int, message: str) -> None:
    """End this learner for its own error: print ``Error: message`` first, then post it so the
    other learners' heartbeat threads end the job within a heartbeat interval (instead of
    waiting for this one until a timeout), and exit with status 1 at once."""
    say(f"Error: learner {rank}: {message}")
    if _reports is not None:
        _first_report(rank, message)
    os._exit(1)


REPORT_POLL_S = 1.0  # how often every learner looks for another's failure report


def lost_store() -> str:
    """What losing the rendezvous store means, where this learner's store lives. Elastic: a
    learner stopped past the timeout was dropped, and the store ended once the others had
    finished without it. Half the timeout is the bar, not all of it: a peer's wait that began
    before the stop, or a heartbeat seen late, drops a learner stopped a little under the
    timeout; a learner that was never stopped measures ~0 s."""
    if not storehost.in_use():
        return "lost learner 0 (it hosts the rendezvous store)"
    live = _liveness
    if live is not None and live.membership is not None \
            and live.stopped_for() > live.timeout_s / 2:
        return (f"dropped from the run: this learner was stopped for {live.stopped_for():.0f} "
                f"s (--exchange-timeout is {live.timeout_s:.0f} s); the others went "
                "on without it and have finished (the run's store process has ended)")
    return "lost the rendezvous store (its own process, asrdist-store, ended)"


def store_lost(exc: BaseException) -> bool:
    """Whether a store call failed because its host (learner 0, or an elastic run's store
    process) is gone (the client never reconnects: a closed connection is final)."""
    return isinstance(exc, dist.DistNetworkError)


def peer_lost(exc: BaseException) -> bool:
    """Whether a collective failed because a peer went away (no bug of this learner: one line,
    no traceback)."""
    text = str(exc)
    return isinstance(exc, dist.DistError) or (
        isinstance(exc, RuntimeError) and "gloo" in text and any(
            s in text for s in ("Connection reset", "closed by peer", "Connection refused",
                                "Timed out", "timed out")))


_aborting = threading.Lock()  # held by the thread that ends the process (one line, not two)


def abort(rank: int, message: str, post: bool = True) -> NoReturn:
    """Print ``message`` for learner ``rank`` and end this process with status 1 at once.

    A learner that fails because another one already did adds that first report, so every
    survivor names the root cause, not just the neighbour that vanished before it. ``post``
    False: the store is gone (each further call would only log a C++ stack before the line).
    """
    _aborting.acquire()  # the first thread to abort speaks; any other waits for the exit
    line = f"asrdist: learner {rank}: {message}"
    log.error(line)
    say(line)  # first: a store call that fails logs a C++ stack
    first = _first_report(rank, message) if _reports is not None and post else None
    if first is not None:
        say(f"asrdist: learner {rank}: [first report: {first[:300]}]")
    os._exit(1)


def _ended(pid: int) -> bool:
    """Whether process ``pid`` (on this host) has ended: gone, or a zombie not yet reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    except (OSError, IndexError):  # no /proc here: never taken as ended
        return False
    return state in ("Z", "X")


class Liveness:
    """Heartbeat thread for one learner; see the module docstring."""

    def __init__(self, rank: int, world_size: int, timeout_s: float,
                 membership: Membership | None = None) -> None:
        self.rank = rank
        self.membership = membership
        self.step = 0  # steps done, published with the heartbeat (a departure's step)
        self.world_size = world_size
        self.timeout_s = timeout_s
        self.interval_s = max(0.2, min(5.0, timeout_s / 20))
        # elastic hadpsgd: the learners of this one's node (it cannot go on without them)
        self.node: tuple[int, ...] = ()
        self._stopwatch = StopWatch()  # how long this process was stopped
        global _reports, _liveness
        self._store = dist.PrefixStore(_PREFIX, dist.distributed_c10d._get_default_store())
        self._signed = SignedStore(self._store, _PREFIX)
        _reports, _liveness = self._signed, self
        self._progress = 0
        self._seen: dict[int, tuple[str, float]] = {}  # rank -> (last value, when it changed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="asrdist-liveness", daemon=True)
        self._store.set(f"hb/{rank}", "0 0 0")
        self._host = socket.gethostname()
        self._signed.set(f"pid/{rank}", f"{self._host} {os.getpid()}")
        self._local: dict[int, int] | None = None  # rank -> pid of the learners on this host
        self._thread.start()

    def _local_peers(self) -> dict[int, int]:
        """The other learners on this host and their pids (read once all have posted)."""
        if self._local is None:
            keys = [f"pid/{r}" for r in range(self.world_size) if r != self.rank]
            if not self._store.check(keys):
                return {}
            found = {}
            for r in range(self.world_size):
                if r != self.rank:
                    value = self._signed.get(f"pid/{r}")
                    if value is None:  # forged (refused): none watched yet, read again later
                        return {}
                    host, pid = value.split()
                    if host == self._host:
                        found[r] = int(pid)
            self._local = found
        return self._local

    def gone_learners(self) -> list[tuple[int, int]]:
        """(rank, pid) of the learners on this host whose process has ended (a SIGKILL, the OOM
        killer): known at once, without waiting for their heartbeat to go stale."""
        return [(r, pid) for r, pid in self._local_peers().items() if _ended(pid)]

    def progress(self) -> None:
        """Called by the main thread at every hook: it is not stuck."""
        self._progress += 1

    def _done(self, r: int) -> bool:
        """Whether learner ``r`` announced it finished its steps (signed: a forged one is not)."""
        return self._signed.get(f"done/{r}") is not None

    def _read(self, r: int) -> str | None:
        key = f"hb/{r}"
        return self._store.get(key).decode() if self._store.check([key]) else None

    def _run(self) -> None:
        tick = 0
        store_lost_since: float | None = None
        last_beat = time.monotonic()
        values: dict[int, str | None] = {}
        while not self._pause(min(self.interval_s, REPORT_POLL_S)):
            now = time.monotonic()
            beat = now - last_beat >= self.interval_s - 1e-3
            try:
                if beat:  # the heartbeat proper: every interval
                    tick += 1
                    last_beat = now
                    self._store.set(f"hb/{self.rank}", f"{tick} {self._progress} {self.step}")
                    values = {r: self._read(r) for r in range(self.world_size) if r != self.rank}
                # another learner's failure report: every second at least, whatever the interval
                failed = self._signed.get("first")  # None: none, or forged (refused)
                if self.membership is not None:
                    failed = None  # that learner ends, and is dropped like any other
                    self._check_not_dropped()
                store_lost_since = None
            except (RuntimeError, OSError) as exc:  # the store's process is gone, or hung
                store_lost_since = store_lost_since or now
                hosted_here = self.rank == 0 and not storehost.in_use()
                if not hosted_here and (store_lost(exc) or
                                        now - store_lost_since > min(self.timeout_s, 3.0)):
                    abort(self.rank, f"{lost_store()}: {first_line(exc)}", post=False)
                continue
            if failed is not None and not failed.startswith(f"learner {self.rank}:"):
                abort(self.rank, "another learner failed; ending the job")
            self._end_if_gone()
            if not beat:
                continue
            for r, value in values.items():
                last = self._seen.get(r)
                if value is not None and (last is None or last[0].split()[0] != value.split()[0]):
                    self._seen[r] = (value, now)
            lost = sorted((t, r) for r, (_, t) in self._seen.items() if now - t > self.timeout_s)
            if lost and self.membership is not None:
                for t, r in lost:
                    self.drop(r, f"no heartbeat for {now - t:.0f} s")
            elif lost:  # all of them, longest silent first: the first one is the likely cause
                names = ", ".join(f"learner {r} ({now - t:.0f} s)" for t, r in lost)
                abort(self.rank, f"no heartbeat from {names}: died, was killed or stopped; "
                                 "ending the job")

    def _pause(self, seconds: float) -> bool:
        """The loop's wait (True: stop)."""
        return self._stop.wait(seconds)

    def stopped_for(self) -> float:
        """The longest this process was stopped so far, seconds (:class:`StopWatch`)."""
        return self._stopwatch.stopped_for()

    def _end_if_gone(self) -> None:
        try:
            gone = self.gone_learners()
        except (RuntimeError, OSError):  # the store is gone: the next beat says so
            return
        if gone and self.membership is not None:
            for r, pid in gone:
                self.drop(r, f"its process {pid} ended")
        elif gone:
            names = ", ".join(f"learner {r} (pid {pid})" for r, pid in gone)
            abort(self.rank, f"{names} on this host ended without a word: died or was killed; "
                             "ending the job")

    # -- elastic runs ----------------------------------------------------------------------

    def _check_not_dropped(self) -> None:
        assert self.membership is not None
        left = self.membership.refresh()
        for r in left:
            self._seen.pop(r, None)
        if self.rank in left:
            survivors = self.membership.survivors()
            going = [r for r in survivors if not self._done(r)]
            then = f"the run goes on with learners {survivors}" if going \
                else f"learners {survivors} have finished their steps without it"
            abort(self.rank, f"dropped from the run at step {left[self.rank]} by the other "
                             f"learners (silent for more than {self.timeout_s:.0f} s); {then}; "
                             "ending", post=False)

    def _check_still_in(self) -> None:
        """Elastic, outside the liveness loop: end this learner if it was dropped (or, saying
        so, if the store is gone)."""
        try:
            self._check_not_dropped()
        except (RuntimeError, OSError) as exc:
            abort(self.rank, f"{lost_store()}: {first_line(exc)}", post=False)

    def last_step(self, rank: int) -> int:
        """The step learner ``rank`` last published with its heartbeat."""
        value = self._read(rank)
        parts = value.split() if value is not None else []
        return int(parts[2]) if len(parts) > 2 else 0

    def drop(self, rank: int, why: str) -> None:
        """Elastic: drop learner ``rank`` (not one that finished its steps, nor one already
        dropped); the learner that records it logs one line."""
        assert self.membership is not None
        self._check_still_in()  # a learner dropped itself drops nobody
        try:
            if rank in self.membership.left or rank == self.rank \
                    or self._done(rank):
                return
            step = self.last_step(rank)
            if self.membership.drop(rank, step):
                line = (f"asrdist: learner {rank} left at step {step} (its last heartbeat's; "
                        f"{why}); going on with learners {self.membership.survivors()}")
                say(line)
        except (RuntimeError, OSError) as exc:  # the store is gone with its process
            abort(self.rank, f"{lost_store()}: {first_line(exc)}", post=False)
        self._seen.pop(rank, None)

    def stalled_learners(self) -> list[int]:
        """Learners whose heartbeat has not moved for three intervals (likely dead)."""
        now = time.monotonic()
        return [r for r, (_, t) in self._seen.items() if now - t > 3 * self.interval_s]

    def explain(self, exc: BaseException) -> str:
        """Why a collective failed: name the learner that stopped, waiting a few heartbeats."""
        deadline = time.monotonic() + 4 * self.interval_s + 1.0
        while time.monotonic() < deadline:
            gone = self.gone_learners()
            if gone:
                names = ", ".join(f"learner {r} (pid {pid})" for r, pid in gone)
                return f"{names} on this host ended without a word ({first_line(exc)})"
            stalled = self.stalled_learners()
            if stalled:
                return f"learner(s) {stalled} stopped responding ({first_line(exc)})"
            time.sleep(self.interval_s)
        return f"communication failed: {first_line(exc)}"

    def end_job(self, exc: BaseException) -> None:
        """A collective or exchange failed: end the job, naming the learner that stopped.
        Elastic: end this learner only (the others drop it and go on): a hadpsgd node member
        says its node leaves, and who goes on."""
        why = self.explain(exc)
        if self.membership is None:
            abort(self.rank, f"{why}; ending the job")
        self._check_still_in()
        if len(self.node) < 2:
            abort(self.rank, f"{why}; leaving the run", post=False)
        others = [r for r in self.membership.survivors() if r not in self.node]
        goes_on = f"the run goes on with learners {others}" if others \
            else "no other node is left: the run ends"
        mates = ", ".join(map(str, self.node))
        abort(self.rank, f"leaving the run with its node (learners {mates}), which cannot go on "
                         f"without a lost member: {why}; {goes_on}", post=False)

    def wait_all_finished(self, poll_s: float = 0.05,
                          between: Callable[[], None] | None = None) -> None:
        """Announce this learner finished and wait, watching progress, until all have.

        A learner still training must keep calling hooks; one whose progress counter stands
        still for ``timeout_s`` is stuck and ends the job (elastic: is dropped, and the others
        stop waiting for it; ``between`` runs at every poll meanwhile).
        """
        self._signed.set(f"done/{self.rank}", "1")
        self._store.add("finished", 1)
        if self.membership is not None:
            self._wait_survivors_finished(poll_s, between)
            return
        progress_seen: dict[int, tuple[int, float]] = {}
        while self._store.add("finished", 0) < self.world_size:
            now = time.monotonic()
            if not all(self._done(r) for r, _ in self.gone_learners()):
                self._end_if_gone()
            for r in range(self.world_size):
                value = self._read(r) if r != self.rank else None
                if value is None or self._done(r):
                    continue
                prog = int(value.split()[1])
                if progress_seen.get(r, (None,))[0] != prog:
                    progress_seen[r] = (prog, now)
                elif now - progress_seen[r][1] > self.timeout_s:
                    abort(self.rank, f"learner {r} made no progress for {self.timeout_s:.0f} s")
            time.sleep(poll_s)

    def _wait_survivors_finished(self, poll_s: float,
                                 between: Callable[[], None] | None) -> None:
        """Elastic: wait until every learner finished or was dropped."""
        assert self.membership is not None
        progress_seen: dict[int, tuple[int, float]] = {}
        # a learner still training may stand still for timeout_s in an exchange with a peer
        # that froze, before it drops that peer itself: dropping it for the same timeout_s
        # here raced it (both sides dropped at once); twice that is a learner truly stuck
        patience_s = 2 * self.timeout_s
        waiting = set(range(self.world_size)) - {self.rank}
        while True:
            left = self.membership.refresh()
            waiting = {r for r in waiting if r not in left
                       and not self._done(r)}
            if not waiting:
                return
            if between is not None:
                between()
            now = time.monotonic()
            for r in sorted(waiting):
                value = self._read(r)
                if value is None:
                    continue
                prog = int(value.split()[1])
                if progress_seen.get(r, (None,))[0] != prog:
                    progress_seen[r] = (prog, now)
                elif now - progress_seen[r][1] > patience_s:
                    self.drop(r, f"no progress for {patience_s:.0f} s")
            time.sleep(poll_s)

    def stop(self) -> None:
        """Stop the heartbeat thread (before the last collective, so no store use follows it)."""
        self._stop.set()
        self._stopwatch.close()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
