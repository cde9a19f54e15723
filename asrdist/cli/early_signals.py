"""Stop signals that arrive while a learner starts (importing torch takes seconds).

Imported first by asrdist-train, before torch: until the command installs its own handlers
(:class:`asrdist.parallel.processes.preempt.Preemption`), SIGTERM, SIGUSR1 and SIGINT are noted here
rather than ending the process with their default action (a Slurm job cancelled in its first
seconds would otherwise lose its exit status 75). :func:`take` hands the first one over; one
that is not among the run's stop signals then gets its default action after all.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

CAUGHT = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
COMMAND = "asrdist-train"
MODULE_FILE = os.path.join(os.path.dirname(os.path.realpath(__file__)), "train.py")

_first: list[signal.Signals] = []
_previous: dict[signal.Signals, object] = {}


def _note(signum: int, _frame: object) -> None:
    if not _first:
        _first.append(signal.Signals(signum))


def install() -> None:
    """Note the first of :data:`CAUGHT` from now on (main thread only; once)."""
    if _previous or threading.current_thread() is not threading.main_thread():
        return
    for sig in CAUGHT:
        _previous[sig] = signal.signal(sig, _note)


def _started_as_command() -> bool:
    """Whether this process is the command: its console script, ``python -m
    asrdist.cli.train`` or that file run by path (as mpiexec's supervisor restarts it); not a
    program, such as a test run, that imports the command and handles its own signals."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    return (os.path.basename(sys.argv[0] if sys.argv else "") == COMMAND
            or main_file is not None and os.path.realpath(main_file) == MODULE_FILE)


def take(stop_signals: list[signal.Signals]) -> signal.Signals | None:
    """Put the handlers found at start back and return the signal noted so far, if it is one
    of ``stop_signals``; another one gets its default action now (SIGINT: KeyboardInterrupt)."""
    for sig, handler in _previous.items():
        signal.signal(sig, handler)  # type: ignore[arg-type]
    _previous.clear()
    if not _first:
        return None
    sig = _first.pop()
    if sig in stop_signals:
        return sig
    if sig == signal.SIGINT:
        raise KeyboardInterrupt
    os.kill(os.getpid(), sig)  # its default action: the process ends as it would have
    return None


if _started_as_command():
    install()
