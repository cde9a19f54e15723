"""The elastic runs' store process, with real processes: it serves, lives apart from the
learner that started it, and ends on each of its rules (every learner closed or dropped, no
lease renewed, nobody connected), leaving nothing behind."""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import socket
import sys
import time
from datetime import timedelta

import pytest
import torch.distributed as dist

from asrdist.errors import AsrdistError
from asrdist.parallel.launch.rendezvous import free_port
from asrdist.parallel.processes import storehost
from asrdist.parallel.processes.membership import Membership
from tests.parallel.conftest import running_stores


def _ends(pid: int, within: float) -> float:
    """Seconds until store process ``pid`` ended; fails after ``within``."""
    t0 = time.monotonic()
    while pid in running_stores():
        if time.monotonic() - t0 > within:
            os.kill(pid, 9)
            pytest.fail(f"the store process still runs after {within} s")
        time.sleep(0.05)
    return time.monotonic() - t0


def _client(port: int) -> dist.TCPStore:
    return dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=10))


def test_the_store_serves_apart_and_ends_once_every_learner_closed_or_left(tmp_path):
    held = open(tmp_path / "lock", "w")  # a file the starting learner holds open (a run lock)
    port = free_port()
    pid = storehost.start(port, 3, timeout_s=10.0)
    try:
        assert pid in running_stores()  # named asrdist-store
        assert os.getsid(pid) != os.getsid(0)  # a session of its own
        files = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
        assert str(tmp_path / "lock") not in files
        storehost.connect("127.0.0.1", port, 10.0)
        storehost.leave(0)
        assert not storehost.in_use()
        other = _client(port)
        other.set("some/key", "v")  # it serves: another client reads what one wrote
        assert _client(port).get("some/key") == b"v"
        Membership(other, 3).drop(1, 7)  # learner 1 dropped by the others
        time.sleep(3 * storehost.POLL_S)
        assert pid in running_stores(), "ended while learner 2 was still in the run"
        storehost.connect("127.0.0.1", port, 10.0)
        storehost.leave(2)
        assert _ends(pid, 5.0) < 5.0
    finally:
        held.close()
        if pid in running_stores():
            os.kill(pid, 9)


def test_the_store_ends_when_no_learner_renews_its_lease():
    port = free_port()
    pid = storehost.start(port, 2, timeout_s=10.0, idle_s=3.0)
    try:
        storehost.connect("127.0.0.1", port, 10.0)  # renews its lease every second
        time.sleep(6.0)
        assert pid in running_stores(), "ended while a learner renewed its lease"
        storehost.leave(0)  # learner 1 never closes nor is dropped: only the idle rule is left
        waited = _ends(pid, 12.0)
        assert waited >= 2.0, f"ended {waited:.1f} s after the last lease: before its bound"
    finally:
        if pid in running_stores():
            os.kill(pid, 9)


def test_the_store_ends_when_no_learner_connects():
    pid = storehost.start(free_port(), 2, timeout_s=1.0, idle_s=1.0)
    _ends(pid, 10.0)


def test_a_port_in_use_is_one_line_naming_it():
    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(AsrdistError, match=rf"store process for port {port} did not start"):
            storehost.start(port, 2, timeout_s=5.0)


def test_the_store_process_prints_to_its_stderr_never_to_a_reused_descriptor(tmp_path):
    """A learner whose sys.stderr is a copy of descriptor 2 (the test harness's), which logs
    to a file and has faulthandler on that copy: after the detach those descriptors are closed
    and the next socket takes one of their numbers; a line printed or logged, and a crash's
    traceback, must reach descriptor 2, not that socket (a learner read such a line as the
    store's answer to its check and ended)."""
    err, log_file = tmp_path / "err.txt", tmp_path / "learner.log"
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT), 2)
            sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)
            logging.getLogger().addHandler(logging.FileHandler(log_file))
            logging.getLogger().addHandler(logging.StreamHandler(sys.stderr))
            faulthandler.enable(sys.stderr)
            copies = {sys.stderr.fileno(), logging.getLogger().handlers[-2].stream.fileno()}
            storehost._detach(keep=write_end)
            pairs = []  # sockets, until they hold the numbers of the closed copies
            while len(pairs) < 64 and not {s.fileno() for p in pairs for s in p} & copies:
                pairs.append(socket.socketpair())
            reused = {s.fileno() for p in pairs for s in p} & copies
            print("printed", file=sys.stderr)
            logging.getLogger().warning("logged")
            crashing = os.fork()
            if crashing == 0:
                faulthandler._sigsegv()  # a crash in the store process: its traceback
            for _ in range(100):  # 10 s at most: a dump that blocks fails, not hangs
                if os.waitpid(crashing, os.WNOHANG)[0]:
                    break
                time.sleep(0.1)
            else:
                os.kill(crashing, 9)
            stray = b""
            for s in (s for p in pairs for s in p):
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    stray += s.recv(100)
            os.write(write_end, f"{len(reused)} {stray!r}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    os.waitpid(child, 0)
    reused, stray = os.read(read_end, 200).decode().split(" ", 1)
    os.close(read_end)
    assert int(reused) > 0, "no closed descriptor was taken again: the test shows nothing"
    assert stray == "b''"
    lines = err.read_text().splitlines()
    assert "printed" in lines and any(line.endswith("logged") for line in lines), lines
    assert "Traceback" not in err.read_text()
    assert "Fatal Python error: Segmentation fault" in err.read_text()
    assert log_file.read_text() == ""
