"""Issue 41's network scenarios, acted out for real: a 2-learner asrdist-train run (learners as
processes of their own, torchrun's variables, the run secret from the run dir) listens on the
named address alone; a stranger on the host who reads the store cannot reach the outer state
nor stop the run; the outer server refuses a bad push and takes no path from the network.

Each probe takes an empty scratch dir and returns ``(ok, detail)``; ``python -m bench.probes
network`` prints them as rows.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from multiprocessing.connection import Client
from pathlib import Path

import torch
import torch.distributed as dist

from asrdist.parallel.launch.rendezvous import free_port
from asrdist.parallel.processes import preempt, secret
from asrdist.parallel.processes.outer_link import StoreOuterLink
from asrdist.parallel.processes.outer_server import STATE_FILE, OuterServer
from asrdist.parallel.rules.async_outer import AsyncOuter
from asrdist.testing import make_corpus
from asrdist.testing.sockets import listening
from asrdist.testing.stranger import approach_outer_server

NAMED = {"127.0.0.1", "::1"}
DEFAULT_GROUP = "0/"  # torch's default group's prefix in the store
TINY = ["--layers=1", "--units=8", "--chunk-len=10", "--batch-size=4", "--shuffle-buffer=16",
        "--heldout-utts=2", "--lr-ref-batch=8", "--log-every=1", "--epochs=50",
        "--checkpoint-every=100", "--exchange-timeout=30", "--distance-every=0"]


@contextlib.contextmanager
def _learners(scratch: Path, *options: str) -> Iterator[tuple[list[subprocess.Popen], int]]:
    """Two asrdist-train learners on a tiny corpus into ``scratch/run`` (stderr in
    ``scratch/err<rank>.txt``), rendezvousing at 127.0.0.1; their processes and the port.
    Killed on the way out if still running."""
    data, targets = make_corpus(scratch / "corpus", num_utts=16)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != secret.SECRET_ENV}
    procs = []
    for rank in range(2):
        env_r = {**env, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                 "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                 "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        with open(scratch / f"err{rank}.txt", "w") as err:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "asrdist.cli.train", "--data", str(data), "--targets",
                 str(targets), "--out", str(scratch / "run"), *TINY, *options],
                env=env_r, stdout=subprocess.DEVNULL, stderr=err))
    try:
        yield procs, port
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def _finish(procs: list[subprocess.Popen], limit: float = 180.0) -> list[int | None]:
    deadline = time.monotonic() + limit
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(max(0.1, deadline - time.monotonic()))
    return [p.poll() for p in procs]


def _training(scratch: Path, procs: list[subprocess.Popen], limit: float = 120.0) -> bool:
    """Wait until learner 0 logged a training step (False if a learner ended first)."""
    metrics = scratch / "run" / "metrics.jsonl"
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if metrics.exists() and '"train"' in metrics.read_text():
            return True
        if any(p.poll() is not None for p in procs):
            return False
        time.sleep(0.1)
    return False


def _store_processes(port: int) -> list[int]:
    """Pids of the asrdist-store processes listening on ``port``."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
            if comm == "asrdist-store" and any(p == port for _, p in listening(int(entry))):
                found.append(int(entry))
    return found


def _tail(scratch: Path, rank: int) -> str:
    return (scratch / f"err{rank}.txt").read_text()[-200:].replace("\n", " / ")


def _listeners_of_run(scratch: Path, *options: str) -> tuple[bool, str]:
    """Sample the run's processes' listening sockets while it trains."""
    seen: set[tuple[str, int]] = set()
    with _learners(scratch, "--max-steps=30", *options) as (procs, port):
        if not _training(scratch, procs):
            return False, f"the run did not train: {_tail(scratch, 0)}"
        pids = [p.pid for p in procs] + _store_processes(port)
        for _ in range(10):
            for pid in pids:
                with contextlib.suppress(OSError):
                    seen |= listening(pid)
            time.sleep(0.2)
        codes = _finish(procs)
    beyond = sorted(s for s in seen if s[0] not in NAMED)
    ok = bool(seen) and not beyond and codes == [0, 0]
    return ok, (f"{len(pids)} processes, listening on {sorted({a for a, _ in seen})}; "
                f"beyond 127.0.0.1: {beyond or 'none'}; exit {codes}")


def no_wide_listener(scratch: Path) -> tuple[bool, str]:
    """no socket of a 2-learner run listens beyond the named address"""
    fail_stop = _listeners_of_run(scratch / "ssgd", "--algo=ssgd")
    elastic = _listeners_of_run(scratch / "elastic", "--algo=diloco-async", "--elastic",
                                "--avg-period=2")
    return fail_stop[0] and elastic[0], f"ssgd: {fail_stop[1]}; elastic diloco-async (its " \
                                        f"store process too): {elastic[1]}"


def stranger_outer_server(scratch: Path) -> tuple[bool, str]:
    """a client with the store's contents but without the run secret cannot connect to the outer server"""  # noqa: E501 - the row's name
    elsewhere, report = scratch / "elsewhere", scratch / "stranger.txt"
    with _learners(scratch, "--algo=diloco-async", "--elastic", "--avg-period=2",
                   "--max-steps=16") as (procs, port):
        stranger = multiprocessing.get_context("fork").Process(
            target=approach_outer_server, args=(port, str(elsewhere), str(report)))
        stranger.start()
        stranger.join(120)
        codes = _finish(procs)
    said = report.read_text() if report.exists() else "the stranger said nothing"
    written = (elsewhere / STATE_FILE).exists()
    ok = said.startswith("refused") and not written and codes == [0, 0]
    return ok, f"stranger {said}; {'a file' if written else 'nothing'} written where it " \
               f"asked; learners exit {codes}"


def forged_stop(scratch: Path) -> tuple[bool, str]:
    """a forged stop is refused and the run finishes"""
    with _learners(scratch, "--algo=ssgd", "--max-steps=24") as (procs, port):
        if not _training(scratch, procs):
            return False, f"the run did not train: {_tail(scratch, 0)}"
        raw = dist.TCPStore("127.0.0.1", port, None, False, timedelta(seconds=30))
        for default in (raw, dist.PrefixStore("default_pg", raw)):  # store passed, or tcp://
            dist.PrefixStore(preempt.STOP_PREFIX, dist.PrefixStore(DEFAULT_GROUP, default)).set(
                "any", "SIGTERM")
        codes = _finish(procs)
    refused = [r for r in range(2) if "refused asrdist/stop/any" in
               (scratch / f"err{r}.txt").read_text()]
    ok = codes == [0, 0] and refused == [0, 1]
    return ok, f"learners exit {codes} (a stop would be 75); refused and named by {refused}"


@contextlib.contextmanager
def _server(scratch: Path) -> Iterator[tuple[OuterServer, StoreOuterLink]]:
    """An outer server of 2 learners (this process holds a run secret meanwhile), learner 0
    connected."""
    before = os.environ.get(secret.SECRET_ENV)
    os.environ[secret.SECRET_ENV] = os.urandom(16).hex()
    try:
        server = OuterServer(2, 10.0, run_dir=scratch / "run")
        link = StoreOuterLink(rank=0, address=("127.0.0.1", server.port), key=server.key,
                              state=AsyncOuter(torch.zeros(6), 2, 4, lr=0.5, momentum=0.5),
                              timeout_s=10.0)
        yield server, link
        link.finish()
    finally:
        os.environ.pop(secret.SECRET_ENV)
        if before is not None:
            os.environ[secret.SECRET_ENV] = before


def _as_learner_1(server: OuterServer, message: dict, body: bytes | None = None) -> dict:
    conn = Client(("127.0.0.1", server.port), authkey=server.key)
    conn.send_bytes(json.dumps({"kind": "hello", "rank": 1}).encode())
    conn.recv_bytes()
    conn.send_bytes(json.dumps(message).encode())
    if body is not None:
        conn.send_bytes(body)
    answer: dict = json.loads(conn.recv_bytes())
    conn.close()
    return answer


def bad_push(scratch: Path) -> tuple[bool, str]:
    """a push of NaN / wrong shape refused"""
    push = {"kind": "push", "steps": 4, "seconds": 1.0, "encoding": "float32"}
    with _server(scratch) as (server, _):
        nan = _as_learner_1(server, {**push, "numel": 6},
                            torch.full((6,), float("nan")).numpy().tobytes())
        shape = _as_learner_1(server, {**push, "numel": 5}, torch.ones(5).numpy().tobytes())
        untouched = torch.equal(server.state.weights, torch.zeros(6))
    ok = "not finite" in nan.get("error", "") and "the state has 6" in shape.get("error", "") \
        and untouched
    return ok, f"NaN: {nan.get('error', nan)}; 5 values: {shape.get('error', shape)}; " \
               f"state {'untouched' if untouched else 'CHANGED'}"


def save_takes_no_path(scratch: Path) -> tuple[bool, str]:
    """save message takes no path"""
    elsewhere = scratch / "elsewhere"
    with _server(scratch) as (server, _):
        answer = _as_learner_1(server, {"kind": "save", "step": 3, "dir": str(elsewhere)})
    at_run = (scratch / "run" / STATE_FILE).exists()
    ok = "token" in answer and not elsewhere.exists() and at_run
    return ok, f"answer {answer}; written under the run dir: {at_run}; under the message's " \
               f"dir: {elsewhere.exists()}"


PROBES: list[Callable[[Path], tuple[bool, str]]] = [
    no_wide_listener, stranger_outer_server, forged_stop, bad_push, save_takes_no_path]
