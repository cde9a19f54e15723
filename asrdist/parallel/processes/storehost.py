"""Elastic runs: the rendezvous store in a process of its own, so that learner 0 can leave too.

torch.distributed's TCP store normally lives in learner 0's process; when learner 0 dies the
others lose it (the heartbeats, the departures and the stop flag are in it) and end. Under
``--elastic`` learner 0 instead forks a small process that serves the store at
MASTER_ADDR:MASTER_PORT (:func:`start`), and every learner, learner 0 included, connects to it
as a client (:func:`connect`). It listens on that address alone, or ``--bind``'s
(:mod:`asrdist.parallel.processes.bind`), and reads only signed ``closed`` messages
(:mod:`asrdist.parallel.processes.signed`). The store process is detached: a session of its own (a
SIGKILL of learner 0, or a signal to its process group, does not reach it), no file of the learner's
held open but stderr (not the run dir's lock), named ``asrdist-store`` (``ps -e``). It is
forked, not started as a new interpreter: importing torch again would take seconds.

It never outlives the run. It ends
- once every learner has left for good: closed its transport (:func:`leave`, after its last
  use of the store) or been dropped by the others (:mod:`asrdist.parallel.processes.membership`);
- when no learner has renewed its lease for ``idle_s``: a thread in each learner renews it
  every second on a connection of its own for as long as the process lives, so this happens
  only when every learner died without a word (the whole job killed, or fail-stop ends);
- at start, when no learner connects within the rendezvous timeout and ``idle_s``.
It counts its polls (one a second) instead of reading the clock: a job suspended whole
(SIGSTOP to every process, as Slurm's suspend) and resumed does not find its store gone.

An elastic diloco-async run's outer state lives here too, so that learner 0 can leave: when a
learner asks for it (a store key, :func:`outer_address`) the process starts serving it at its
next poll, on threads of its own (:mod:`asrdist.parallel.processes.outer_server`); those end with
the process, by the rules above (every learner closed or dropped means every one has pushed for the
last time).
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import logging
import os
import select
import signal
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from asrdist.errors import AsrdistError, first_line
from asrdist.parallel.processes.bind import listening_socket
from asrdist.parallel.processes.membership import Membership
from asrdist.parallel.processes.outer_server import OuterServer, outer_key
from asrdist.parallel.processes.signed import SignedStore

NAME = b"asrdist-store"  # the process's name, as ps and /proc/PID/comm show it
_PREFIX = "asrdist/store/"
POLL_S = 1.0  # the store process's poll, and the learners' lease renewal
IDLE_MIN_S = 30.0
# diloco-async's outer state (asrdist.parallel.processes.outer_server): asked for, then its port
OUTER_WANT, OUTER_ADDRESS = "outer/want", "outer/address"


def idle_bound(timeout_s: float) -> float:
    """How long the store waits for a lease renewal: a learner whose lease thread is silent
    that long is frozen, and the others drop it after ``timeout_s`` anyway."""
    return max(IDLE_MIN_S, timeout_s)


def start(port: int, world_size: int, timeout_s: float, idle_s: float | None = None, *,
          bind: str = "127.0.0.1", run_dir: str | None = None) -> int:
    """Fork the store process serving ``bind:port`` (that interface alone) for
    ``world_size`` learners (learner 0 calls it before connecting); its pid, once it listens.
    AsrdistError if it cannot listen. ``idle_s``: see the module docstring (default
    :func:`idle_bound`); ``run_dir``: where the outer state is saved."""
    idle_s = idle_bound(timeout_s) if idle_s is None else idle_s
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:  # a child that forks the store process and exits: no zombie left to reap
        try:
            os.close(read_fd)
            os.setsid()
            if os.fork() == 0:
                _serve(bind, port, world_size, write_fd, idle_s, timeout_s, run_dir)
        finally:
            os._exit(0)
    os.close(write_fd)
    os.waitpid(child, 0)
    try:
        ready, _, _ = select.select([read_fd], [], [], timeout_s)
        answer = os.read(read_fd, 4096).decode(errors="replace") if ready else ""
    finally:
        os.close(read_fd)
    if not answer.startswith("ready "):
        why = answer.removeprefix("error ") if ready else f"no answer in {timeout_s:.0f} s"
        raise AsrdistError(f"--elastic: the rendezvous store process for port {port} did not "
                           f"start: {why or 'it ended without a word'}")
    return int(answer.split()[1])


def _detach(keep: int) -> None:
    """Put signals back to their default actions, drop every inherited file but stderr and
    ``keep``, and take the name :data:`NAME`. The objects inherited are never collected: one
    holding a file would close its descriptor, by then perhaps the store's socket. The
    process's text output is bound again to descriptors 1 and 2 (:func:`_own_output`)."""
    gc.freeze()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    limit = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024
    os.closerange(3, keep)
    os.closerange(keep + 1, limit)
    _own_output()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(15, NAME, 0, 0, 0)  # PR_SET_NAME (Linux)


def _own_output() -> None:
    """Point ``sys.stdout``, ``sys.stderr`` and every logging handler at descriptors 1 and 2.
    What the learner had may write to a descriptor just closed (a ``sys.stderr`` on a copy of
    2, a log file): the store's next connection takes that number, and a line printed there
    lands in a learner's store traffic (it read the line as the store's answer and ended)."""
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    if faulthandler.is_enabled():  # its traceback on a crash: on the new stderr too
        faulthandler.enable(sys.stderr)
    loggers = [logging.getLogger(), *(logger for logger in logging.Logger.manager.loggerDict
                                      .values() if isinstance(logger, logging.Logger))]
    for logger in loggers:
        for handler in list(logger.handlers):
            if isinstance(handler, logging.StreamHandler) \
                    and not isinstance(handler, logging.FileHandler):
                handler.setStream(sys.stderr)
            else:  # a file, a socket: its descriptor is closed (or somebody else's now)
                logger.removeHandler(handler)


def _serve(bind: str, port: int, world_size: int, ready_fd: int, idle_s: float,
           timeout_s: float, run_dir: str | None) -> None:
    """The store process: serve until the run has ended (see the module docstring); never
    returns."""
    _detach(ready_fd)
    try:
        store = dist.TCPStore(bind, port, None, True, timedelta(seconds=timeout_s),
                              wait_for_workers=False,
                              master_listen_fd=listening_socket(bind, port).detach())
    except (RuntimeError, OSError, AsrdistError) as exc:
        why = first_line(exc).strip("'")  # torch's message comes quoted
        os.write(ready_fd, f"error {why}".encode())
        os._exit(1)
    os.write(ready_fd, f"ready {os.getpid()}".encode())
    os.close(ready_fd)
    ours = dist.PrefixStore(_PREFIX, store)
    signed = SignedStore(ours, _PREFIX)
    membership = Membership(store, world_size)
    still, last, started = 0, 0, False
    outer: OuterServer | None = None
    asked = False  # for the outer state's server (started once, or its failure published)
    while True:
        time.sleep(POLL_S)
        try:
            lease = ours.add("lease", 0)
            left = membership.refresh()
            if not asked and ours.check([OUTER_WANT]):
                asked = True
                outer = _serve_outer(signed, world_size, timeout_s, bind, run_dir)
            if outer is not None:
                outer.note_left(left)
            if all(r in left or signed.get(f"closed/{r}") is not None
                   for r in range(world_size)):
                break
        except (RuntimeError, OSError):  # its own server failed: nothing left to serve
            break
        if lease != last:
            still, last, started = 0, lease, True
            continue
        still += 1
        if still * POLL_S >= (idle_s if started else timeout_s + idle_s):
            break
    os._exit(0)


def _serve_outer(signed: SignedStore, world_size: int, timeout_s: float, bind: str,
                 run_dir: str | None) -> OuterServer | None:
    """Start diloco-async's outer-state server here, on ``bind``, and publish its port, signed
    (or why it could not: the learners end saying so, the store goes on). Its key is the run
    secret's (:mod:`asrdist.parallel.processes.secret`), never in the store."""
    # its updates on one thread: this process shares learner 0's machine, and a forked
    # process's OpenMP pool is not to be trusted
    torch.set_num_threads(1)
    try:
        server = OuterServer(world_size, timeout_s, host=bind, run_dir=run_dir)
    except OSError as exc:
        signed.set(OUTER_ADDRESS, f"error {first_line(exc)}")
        return None
    signed.set(OUTER_ADDRESS, str(server.port))
    return server


class _Lease:
    """A thread renewing this learner's lease every second, on a connection of its own (the
    default group's connection may be held for a long wait by another thread)."""

    def __init__(self, addr: str, port: int, timeout_s: float) -> None:
        self._addr, self._port, self._timeout_s = addr, port, timeout_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="asrdist-store-lease",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            store = dist.PrefixStore(_PREFIX, dist.TCPStore(
                self._addr, self._port, None, False, timedelta(seconds=self._timeout_s)))
            while True:
                store.add("lease", 1)
                if self._stop.wait(POLL_S):
                    return
        except (RuntimeError, OSError):  # the store is gone: the liveness thread says so
            return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self._timeout_s)


_client: dist.TCPStore | None = None
_lease: _Lease | None = None
_where: tuple[str, int, float] | None = None  # the store's address, port and timeout


def connect(addr: str, port: int, timeout_s: float) -> dist.TCPStore:
    """A client of the store process at ``addr:port`` (waits for it up to ``timeout_s``), and
    this learner's lease on it."""
    global _client, _lease, _where
    _client = dist.TCPStore(addr, port, None, False, timedelta(seconds=timeout_s))
    _lease = _Lease(addr, port, timeout_s)
    _where = (addr, port, timeout_s)
    return _client


def outer_address() -> tuple[tuple[str, int], bytes]:
    """Where diloco-async's outer state is served, and its key (the run secret's): asks the
    store process to start serving it (at its next poll) and waits, on a connection of its
    own (the shared one may be held by the liveness thread), up to the rendezvous timeout."""
    assert _where is not None, "outer_address needs a store process (connect first)"
    addr, port, timeout_s = _where
    store = SignedStore(dist.PrefixStore(_PREFIX, dist.TCPStore(
        addr, port, None, False, timedelta(seconds=timeout_s))), _PREFIX)
    store.store.set(OUTER_WANT, "1")
    store.store.wait([OUTER_ADDRESS])
    answer = store.get(OUTER_ADDRESS)
    if answer is None:
        raise AsrdistError(f"--elastic diloco-async: {_PREFIX}{OUTER_ADDRESS} in the store is "
                           "not signed with the run's secret (forged): refused")
    if answer.startswith("error "):
        raise AsrdistError(f"--elastic diloco-async: the store process could not serve the "
                           f"outer state: {answer.removeprefix('error ')}")
    return (addr, int(answer)), outer_key()


def client() -> dist.TCPStore | None:
    """This learner's connection to the store process; None where there is none (learner 0
    hosts the store). Departures are recorded here, where the store process reads them
    (torch.distributed's default store adds a prefix of its own to every key)."""
    return _client


def in_use() -> bool:
    """Whether this learner's store is served by a store process (not by learner 0)."""
    return _client is not None


def leave(rank: int) -> None:
    """Tell the store process that learner ``rank`` is done with it (closed its transport,
    its last use of the store) and stop the lease; this process then has no connection to
    it. Nothing where no store process is in use."""
    global _client, _lease, _where
    if _client is None or _lease is None:
        return
    with contextlib.suppress(RuntimeError, OSError):  # gone already: nothing to tell
        SignedStore(dist.PrefixStore(_PREFIX, _client), _PREFIX).set(f"closed/{rank}", "1")
    _lease.stop()
    _client = _lease = _where = None
