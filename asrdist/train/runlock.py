"""One run per output dir: each learner holds a lock on its own file in --out while it runs.

Two jobs on one --out (a double ``sbatch``, a ``--resume`` started while the first still runs)
would otherwise race: both train, each overwriting the other's checkpoints, metrics and
final.pt. Each learner takes an exclusive ``flock`` on ``OUT/.lock.learner<rank>`` and writes
who holds it (host, pid, Slurm job id, since when). The kernel drops the lock when its holder
dies, however it dies, so a crashed run never blocks the next one; a file still naming a holder
that no longer holds the lock is taken over with a warning saying so. Every learner reports
whether it got its lock (one collective), so all refuse alike, naming the first holder found.

``flock`` works across nodes on NFS (Linux emulates it with POSIX byte-range locks there) and
on Lustre mounted with ``flock``; on a file system without locks every learner refuses with
the OS error.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from asrdist.errors import AsrdistError
from asrdist.fsutil import open_fd

log = logging.getLogger(__name__)

JOB_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "TORCHELASTIC_RUN_ID")


def lock_path(out: str | os.PathLike, rank: int) -> Path:
    return Path(out) / f".lock.learner{rank}"


def _holder(rank: int) -> dict[str, Any]:
    """Who this learner is, as a second run would want to read it."""
    job = next(((v, os.environ[v]) for v in JOB_VARIABLES if os.environ.get(v)), None)
    return {"learner": rank, "host": socket.gethostname(), "pid": os.getpid(),
            "job": f"{job[0]}={job[1]}" if job else None,
            "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def describe(holder: dict[str, Any] | None) -> str:
    """``learner 0, pid 123 on host gpu01 (SLURM_JOB_ID=77), since ...``."""
    if not holder:
        return "a run that is starting (no holder written yet)"
    job = f" ({holder['job']})" if holder.get("job") else ""
    return (f"learner {holder.get('learner')}, pid {holder.get('pid')} on host "
            f"{holder.get('host')}{job}, since {holder.get('since')}")


def _read(fd: int) -> dict[str, Any] | None:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 4096).decode(errors="replace").strip()
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


class RunLock:
    """This learner's lock on ``out``; :meth:`release` at the end (death releases it too)."""

    def __init__(self, out: str | os.PathLike, rank: int) -> None:
        self.out, self.rank = Path(out), rank
        self.path = lock_path(out, rank)
        self._fd: int | None = None
        self.refused: str | None = None  # why this learner did not get its lock

    def acquire(self) -> bool:
        """Try to take the lock (never waits); False, with :attr:`refused` set, if held."""
        self.out.mkdir(parents=True, exist_ok=True)
        # never through a link planted there: emptying it would empty the file it points to
        fd = open_fd(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise AsrdistError(f"{self.path}: cannot lock the run dir: {exc.strerror}") \
                    from exc
            self.refused = describe(holder)
            return False
        stale = _read(fd)
        if stale is not None:
            log.warning("%s: taking over from a run that ended without releasing it (%s)",
                        self.out, describe(stale))
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(_holder(self.rank)) + "\n").encode())
        self._fd = fd
        return True

    def release(self) -> None:
        """Empty the file (a clean end: nothing to take over) and drop the lock."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, 0)
        os.close(self._fd)
        self._fd = None


def lock_run(out: str | os.PathLike, rank: int,
             gather: Callable[[str | None], dict[int, str | None]]) -> RunLock:
    """Every learner's lock on ``out``, or the same AsrdistError on every learner naming the
    run that holds it (``gather`` exchanges the learners' results: all go on, or none)."""
    lock = RunLock(out, rank)
    got = lock.acquire()
    held = [(r, why) for r, why in sorted(gather(lock.refused).items()) if why is not None]
    if held:
        if got:
            lock.release()
        raise AsrdistError(
            f"{out} is in use by another run ({held[0][1]}): one run per output dir; wait "
            "for it to end, or choose another --out")
    return lock
