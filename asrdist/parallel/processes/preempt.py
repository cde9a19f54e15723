"""Preemption: a signal makes every learner stop at an agreed step, after a checkpoint.

Slurm sends SIGTERM before it preempts a job or ends it at its time limit (and any signal
``sbatch --signal`` or ``scancel --signal`` names, some time before); Kubernetes and torchrun
send SIGTERM too. The handler only notes the signal; the trainer asks :meth:`Preemption.reached`
after every step. A learner that got a signal announces it in the rendezvous store, so a signal
to one learner stops them all. Learners that take every step together (a strategy's
``lockstep`` set: all of ssgd and ma, one node of hadpsgd) must stop at the same step: the first
of them to see the announcement proposes the next step none of them can pass without it (the
next multiple of the set's period) and the others take that proposal (first writer wins). An
asynchronous learner, alone in its set, stops after its current step. Both are signed with the
run's secret (:mod:`asrdist.parallel.processes.signed`): a stop forged in the store is refused,
named in the log, and the run goes on.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Sequence

import torch.distributed as dist

from asrdist.errors import AsrdistError, first_line
from asrdist.parallel.processes.health import abort, lost_store
from asrdist.parallel.processes.signed import SignedStore
from asrdist.progress import say

log = logging.getLogger(__name__)

# The exit status of a learner that stopped for a signal after its checkpoint: EX_TEMPFAIL
# ("try again"), which the Slurm template turns into a requeue of the job with --resume.
STOPPED_STATUS = 75

# where in the store a learner asks its peers to stop (SignedStore signs what is there)
STOP_PREFIX = "asrdist/stop/"


def parse_signals(names: str) -> list[signal.Signals]:
    """``"TERM,USR1"`` -> the signals; refuses unknown names and ones that cannot be caught."""
    found = []
    for name in filter(None, (n.strip().upper() for n in names.split(","))):
        sig = getattr(signal, name if name.startswith("SIG") else "SIG" + name, None)
        if not isinstance(sig, signal.Signals) or sig in (signal.SIGKILL, signal.SIGSTOP):
            raise AsrdistError(f"--stop-signals: {name!r} is not a signal that can be caught")
        found.append(sig)
    return found


# A second SIGINT this soon after the first is the same Ctrl-C: a terminal signals the whole
# process group (launcher and learners), and the launcher passes it on to the learners again.
SAME_CTRL_C_S = 1.0
INTERRUPTED_STATUS = 130  # 128 + SIGINT, as a shell reports a process ended by Ctrl-C


def _second_ctrl_c_ends(fd: int) -> None:
    """Read the signal numbers written to the wakeup pipe; end the process at a SIGINT that
    follows another by more than :data:`SAME_CTRL_C_S`."""
    first: float | None = None
    while True:
        try:
            got = os.read(fd, 64)
        except OSError:
            return
        if not got:
            os.close(fd)
            return
        for signum in got:
            if signum != signal.SIGINT:
                continue
            now = time.monotonic()
            if first is None:
                first = now
            elif now - first > SAME_CTRL_C_S:
                rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
                say(f"asrdist: learner {rank}: second SIGINT: ending now, without a "
                    "checkpoint (the last one written is kept)")
                os._exit(INTERRUPTED_STATUS)


class Preemption:
    """Notes the stop signals (install from the main thread) and agrees on the stop step.

    A second SIGINT (Ctrl-C) ends the learner at once, without a checkpoint, in one line,
    even while its main thread waits in a collective (where no Python handler runs): a thread
    reads the signals from :func:`signal.set_wakeup_fd`'s pipe, written as they arrive.
    ``early``: a stop signal that arrived before the handlers were installed (while the
    process started), taken as if it came now.
    """

    def __init__(self, signals: Sequence[signal.Signals] = (),
                 early: signal.Signals | None = None) -> None:
        self.signal: str | None = None  # the name of the signal that asked to stop
        self._wakeup: tuple[int, int] | None = None
        self.stop_at: int | None = None
        self._group: tuple[int, ...] = (0,)
        self._period = 1
        self._store: SignedStore | None = None
        self._announced = False
        self._previous = {sig: signal.signal(sig, self._note) for sig in signals}
        if signal.SIGINT in self._previous:
            self._watch_ctrl_c()
        if early is not None:
            self._note(early, None)

    def _watch_ctrl_c(self) -> None:
        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:  # not the main thread: no second-Ctrl-C exit
            os.close(read)
            os.close(write)
            return
        self._wakeup = (read, write)
        threading.Thread(target=_second_ctrl_c_ends, args=(read,), name="asrdist-ctrl-c",
                         daemon=True).start()

    def restore(self) -> None:
        """Put back the handlers found at construction (the process lives on: tests)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if self._wakeup is not None:
            signal.set_wakeup_fd(-1)
            os.close(self._wakeup[1])  # the watching thread reads end-of-file and ends
            self._wakeup = None

    def _note(self, signum: int, frame: object) -> None:
        if self.signal is None:
            self.signal = signal.Signals(signum).name
            log.warning("got %s: stopping after this step's checkpoint%s", self.signal,
                        " (Ctrl-C again ends at once, without one)"
                        if signum == signal.SIGINT else "")

    def attach(self, group: tuple[int, ...], period: int) -> None:
        """The learners that must stop at the same step as this one and every how many steps
        they meet (``Strategy.lockstep``); the store is torch.distributed's, if initialised."""
        self._group, self._period = group, period
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            self._store = SignedStore(dist.PrefixStore(
                STOP_PREFIX, dist.distributed_c10d._get_default_store()), STOP_PREFIX)

    def reached(self, completed: int) -> bool:
        """Whether to stop now, ``completed`` steps done (call once after every step)."""
        try:
            return self._reached(completed)
        except (RuntimeError, OSError) as exc:  # the store lives in learner 0's process
            abort(dist.get_rank(), f"{lost_store()}: {first_line(exc)}", post=False)
            raise  # not reached: abort ends the process

    def _reached(self, completed: int) -> bool:
        if self.stop_at is None:
            asked = self.signal is not None
            if self._store is not None:
                if asked and not self._announced:
                    self._store.set("any", self.signal or "")
                    self._announced = True
                elif not asked and self._store.check("any"):
                    told = self._store.get("any")  # None: forged, refused
                    if told is not None:
                        self.signal = told + " (to another learner)"
                        asked = True
            if asked:
                self.stop_at = self._agree(completed)
        return self.stop_at is not None and completed >= self.stop_at

    def _agree(self, completed: int) -> int:
        if len(self._group) == 1 or self._store is None:
            return completed
        proposal = (completed // self._period + 1) * self._period
        key = f"at/{self._group[0]}"
        return int(self._store.claim(key, str(proposal)))
