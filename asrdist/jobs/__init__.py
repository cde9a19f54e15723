"""The ``--nj`` jobs of a stage: how the work is split, and where the jobs run.

:func:`split` divides a stage's utterances as Kaldi's utils/split_data.sh --per-utt does. A
:class:`Runner` runs one job per part and hands back their results in job order; the first job
to fail stops them all, and its error, naming the job, is raised. :class:`LocalRunner` runs the
jobs in processes of this machine, as Kaldi's run.pl; :class:`asrdist.jobs.slurm.SlurmRunner`
submits them to Slurm, as slurm.pl; a stage's ``--cmd`` picks one (:mod:`asrdist.jobs.cmd`), and
the stages that take a Runner do not change.

A job is an object made where it runs, from picklable arguments; the stage calls its methods by
name, on every job at once. A job keeps what it loaded between calls (the GMM trainer's
features and graphs, a decoder's graph), so it loads it once. A method that yields runs to its
end: each item is one step on the stage's progress display, and the stage gets the list.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import pickle
import signal
import sys
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait
from types import GeneratorType
from typing import Any, TypeVar

from asrdist.errors import AsrdistError
from asrdist.progress import Progress

T = TypeVar("T")


def split(items: Sequence[T], nj: int) -> list[list[T]]:
    """``items`` in min(nj, len(items)) contiguous parts, in order, never an empty one: as
    Kaldi's split_scp.pl, each len // nj long and the first len % nj one longer."""
    if nj < 1:
        raise ValueError(f"nj must be positive, got {nj}")
    parts = min(nj, len(items))
    if parts == 0:
        return []
    size, longer = divmod(len(items), parts)
    bounds = [0]
    for j in range(parts):
        bounds.append(bounds[-1] + size + (j < longer))
    return [list(items[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def split_groups(groups: Sequence[Sequence[T]], nj: int) -> list[list[T]]:
    """The items of ``groups`` in min(nj, len(groups)) contiguous parts, never an empty one and
    never a group divided (a file's utterances, read once by one job), each part near an
    equal share of the items: a part ends where its share ends closer to the group's end than
    to its start."""
    if nj < 1:
        raise ValueError(f"nj must be positive, got {nj}")
    count = min(nj, len(groups))
    total = sum(len(g) for g in groups)
    parts: list[list[T]] = []
    placed = 0
    for i, group in enumerate(groups):
        share_reached = placed + len(group) / 2 > total * len(parts) / count
        if not parts or (len(parts) < count and (
                share_reached or len(groups) - i == count - len(parts))):
            parts.append([])
        parts[-1].extend(group)
        placed += len(group)
    return parts


def deal(items: Sequence[T], nj: int) -> list[list[T]]:
    """``items`` dealt round robin into min(nj, len(items)) parts: for work whose cost changes
    along the sorted order (a test set sorted by speaker, one synthetic voice much slower to
    decode than another), so that no job gets all the slow part."""
    if nj < 1:
        raise ValueError(f"nj must be positive, got {nj}")
    return [list(items[j::nj]) for j in range(min(nj, len(items)))]


class Jobs(ABC):
    """Jobs that have been made; call their methods, then close them (``with``)."""

    def __init__(self, name: str, count: int) -> None:
        self.name, self.count = name, count

    def __len__(self) -> int:
        return self.count

    def label(self, job: int) -> str:
        """How an error names job ``job`` (0-based): ``align job 2/4``, as run.pl counts."""
        return f"{self.name} job {job + 1}/{self.count}"

    def call(self, method: str, *args: Any, progress: Progress | None = None) -> list:
        """``method(*args)`` on every job; their results in job order."""
        return self.call_each(method, [args] * self.count, progress)

    @abstractmethod
    def call_each(self, method: str, args: Sequence[tuple], progress: Progress | None = None
                  ) -> list:
        """``method(*args[j])`` on job j; their results in job order."""

    @abstractmethod
    def close(self) -> None:
        """Let the jobs end."""

    def __enter__(self) -> Jobs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Runner(ABC):
    """Where a stage's jobs run."""

    @abstractmethod
    def start(self, name: str, factory: Callable[..., Any], args: Sequence[tuple]) -> Jobs:
        """Job j is ``factory(*args[j])``, made where it runs; returns once every job is made,
        or raises the first failure."""

    def map(self, name: str, fn: Callable[..., Any], args: Sequence[tuple],
            progress: Progress | None = None) -> list:
        """Job j runs ``fn(*args[j])`` once; their results in job order."""
        with self.start(name, _Call, [(fn,)] * len(args)) as jobs:
            return jobs.call_each("run", args, progress)


class LocalRunner(Runner):
    """Every job at once in a process of its own on this machine (Kaldi's run.pl); a single
    job runs in this process, without a process's start-up."""

    def start(self, name: str, factory: Callable[..., Any], args: Sequence[tuple]) -> Jobs:
        if len(args) == 1:
            return _InProcess(name, factory, args[0])
        return _Processes(name, factory, args)


LOCAL = LocalRunner()


class _Call:
    """A job that runs one function (:meth:`Runner.map`)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def run(self, *args: Any) -> Any:
        return self.fn(*args)


def _run(method: Callable[..., Any], args: tuple, tick: Callable[[int], None]) -> Any:
    """``method(*args)``; a generator is run to its end, a tick per item, into a list."""
    value = method(*args)
    if not isinstance(value, GeneratorType):
        return value
    items = []
    for item in value:
        items.append(item)
        tick(1)
    return items


def _named(exc: BaseException, job: str, child_traceback: str = "") -> BaseException:
    """``exc`` naming ``job``: in front of an AsrdistError's message (the one line a CLI
    prints), in a note (with the job's own traceback) on any other error."""
    if isinstance(exc, AsrdistError):
        exc.message = f"{job}: {exc.message}"
        exc.args = (exc.message,)
    else:
        exc.add_note(f"raised in {job}" + (f":\n{child_traceback}" if child_traceback else ""))
    return exc


class _InProcess(Jobs):
    """The one job, in this process."""

    def __init__(self, name: str, factory: Callable[..., Any], args: tuple) -> None:
        super().__init__(name, 1)
        with self._naming():
            self._job = factory(*args)

    @contextlib.contextmanager
    def _naming(self) -> Iterator[None]:
        try:
            yield
        except Exception as e:
            _named(e, self.label(0))
            raise

    def call_each(self, method: str, args: Sequence[tuple], progress: Progress | None = None
                  ) -> list:
        (job_args,) = args
        with self._naming():
            tick = progress.update if progress else _ignore
            return [_run(getattr(self._job, method), job_args, tick)]

    def close(self) -> None:
        pass


def _ignore(_n: int) -> None:
    pass


def _portable(exc: Exception) -> tuple[BaseException, str]:
    """``exc`` and its traceback for the parent; an exception that does not pickle becomes a
    RuntimeError with its type and text."""
    tb = traceback.format_exc()
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any pickling failure: send its text instead
        return RuntimeError(f"{type(exc).__name__}: {exc}"), tb
    return exc, tb


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel kill this process when its parent ends (Linux: PR_SET_PDEATHSIG), however
    the parent ends (SIGKILL included); exit now if it has already. Call it first thing in a
    child, started from its parent's main thread (the signal follows the thread that forked)."""
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def _serve(conn: Connection, factory: Callable[..., Any], args: tuple) -> None:
    """A job's process: make the job, then run the parent's calls until it sends None; the
    first error goes back to the parent and ends the process. It dies with the parent (a
    killed decode must not leave its jobs decoding on)."""
    parent = mp.parent_process()
    if parent is not None and parent.pid is not None:
        die_with_parent(parent.pid)
    try:
        job = factory(*args)
        conn.send(("ok", None))
        while (message := conn.recv()) is not None:
            method, call_args = message
            value = _run(getattr(job, method), call_args, lambda n: conn.send(("tick", n)))
            conn.send(("ok", value))
    except Exception as e:  # noqa: BLE001 - every failure goes back to the parent
        conn.send(("error", _portable(e)))


class _Processes(Jobs):
    """Jobs in child processes (spawned: a fork after torch or khg has run can deadlock),
    each answering on its own pipe."""

    def __init__(self, name: str, factory: Callable[..., Any], args: Sequence[tuple]) -> None:
        super().__init__(name, len(args))
        ctx = mp.get_context("spawn")
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        try:
            for job_args in args:
                conn, child = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(child, factory, job_args), daemon=True)
                proc.start()
                child.close()
                self._conns.append(conn)
                self._procs.append(proc)
            self._collect(None)  # every job made
        except BaseException:
            self._stop()
            raise

    def call_each(self, method: str, args: Sequence[tuple], progress: Progress | None = None
                  ) -> list:
        if len(args) != self.count:
            raise ValueError(f"{len(args)} argument tuples for {self.count} jobs")
        try:
            for job, job_args in enumerate(args):
                try:
                    self._conns[job].send((method, job_args))
                except OSError:
                    raise self._died(job) from None
            return self._collect(progress)
        except BaseException:
            self._stop()
            raise

    def _collect(self, progress: Progress | None) -> list:
        """Every job's answer, in job order; the first error (or dead job) is raised."""
        results: list[Any] = [None] * self.count
        waiting = set(range(self.count))
        while waiting:
            watched: dict[Any, int] = {}
            for job in waiting:
                watched[self._conns[job]] = job
                watched[self._procs[job].sentinel] = job
            for job in sorted({watched[ready] for ready in wait(list(watched))}):
                conn = self._conns[job]
                while job in waiting and conn.poll():
                    try:
                        kind, value = conn.recv()
                    except EOFError:
                        raise self._died(job) from None
                    if kind == "tick":
                        if progress is not None:
                            progress.update(value)
                    elif kind == "ok":
                        results[job] = value
                        waiting.discard(job)
                    else:
                        exc, tb = value
                        raise _named(exc, self.label(job), tb)
                if job in waiting and not self._procs[job].is_alive():
                    raise self._died(job)
        return results

    def _died(self, job: int) -> AsrdistError:
        proc = self._procs[job]
        proc.join(1.0)
        return AsrdistError(f"{self.label(job)}: its process ended without an answer "
                            f"(exit code {proc.exitcode}; killed for memory?)")

    def close(self) -> None:
        """Tell every job to end; one that has not within 10 s is killed."""
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.send(None)
        self._end(10.0)

    def _stop(self) -> None:
        """Terminate every job now (another failed, or the stage was interrupted)."""
        for proc in self._procs:
            if proc.is_alive():
                proc.terminate()
        self._end(5.0)

    def _end(self, grace_s: float) -> None:
        deadline = time.monotonic() + grace_s
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []
