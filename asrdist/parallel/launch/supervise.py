"""Under mpiexec, a learner runs as the child of a small supervisor that names its death.

MPICH's mpiexec kills every rank within 0.2 s of one dying, so the survivors never get to say
which learner was lost; the user sees only a pid. The process mpiexec started therefore runs
the learner as its child (same command and environment, the PMI connection inherited) and
waits: a learner killed by a signal (SIGKILL, the OOM killer) is named by its supervisor in
one line before mpiexec ends the job. Stop signals sent to the supervisor are passed on. The
child dies with its supervisor (PR_SET_PDEATHSIG), so mpiexec's clean-up leaves no orphan.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from asrdist.jobs import die_with_parent
from asrdist.parallel.launch.rendezvous import DistEnv
from asrdist.progress import say

_CHILD = "ASRDIST_SUPERVISED"
_PARENT = "ASRDIST_SUPERVISOR_PID"


def _supervised() -> bool:
    """Whether this process is the learner under a supervisor."""
    return os.environ.get(_CHILD) == "1"


def _die_with_supervisor() -> None:
    """In the learner: be killed when the supervisor goes (mpiexec's clean-up kills only it)."""
    die_with_parent(int(os.environ.get(_PARENT, os.getppid())))


def _run_supervised(rank: int, forwarded: Sequence[signal.Signals],
                    early: signal.Signals | None = None) -> int:
    """Run this same command as the learner; return its exit status, naming a death by signal.
    ``early``: a stop signal this process got while starting, passed on at once."""
    child = subprocess.Popen([sys.executable, *sys.orig_argv[1:]],  # -m, or a script
                             env={**os.environ, _CHILD: "1", _PARENT: str(os.getpid())},
                             close_fds=False)  # the PMI socket goes to the learner
    for sig in (*forwarded, signal.SIGINT):
        signal.signal(sig, lambda n, _f: child.send_signal(n))
    if early is not None:
        child.send_signal(early)
    code = child.wait()
    if code >= 0:
        return code
    name = signal.Signals(-code).name
    say(f"asrdist: learner {rank}: killed by {name} (pid {child.pid}); mpiexec ends the "
        "others (the PID and rank in its BAD TERMINATION banner may be another learner's "
        "supervisor: this line names the learner lost)")
    return 1


def supervise_under_mpiexec(denv: DistEnv | None, forwarded: Sequence[signal.Signals],
                            early: signal.Signals | None = None) -> None:
    """Where mpiexec started several learners, make this process their supervisor: it runs the
    learner as its child and exits with its status; in that child, die with the supervisor."""
    if _supervised():
        _die_with_supervisor()
    elif denv is not None and denv.launcher == "mpi" and denv.world_size > 1:
        sys.exit(_run_supervised(denv.rank, forwarded, early))
