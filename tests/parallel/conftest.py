"""Launch real learner processes (gloo, 127.0.0.1, a free port) for the multi-process tests."""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from asrdist.parallel import registry
from asrdist.parallel.launch.rendezvous import free_port
from asrdist.testing import make_corpus
from tests.parallel import (
    _learner,
    test_toy_strategy,  # noqa: F401 - registers the toy before collection
)

registry.specs()  # import every strategy module once, before forking

# The first optimizer imports torch._dynamo (seconds): do it once here, not in every learner.
torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 16-utterance corpus (data dir, targets) for one test module's learner processes."""
    return make_corpus(tmp_path_factory.mktemp("corpus") / "c", num_utts=16)


@dataclass
class Run:
    codes: list[int]
    stderr: list[str]
    results: list[dict | None]
    seconds: list[float]


def _child(scenario: dict, rank: int, n: int, port: int, out: Path) -> None:
    fd = os.open(out / f"err{rank}.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)  # the learner's stderr (abort messages included) goes to a file
    sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)  # see _hang
    torch.set_num_threads(1)
    _learner.run(scenario, rank, n, port, str(out))


def run_learners(scenario: dict, n: int, out: Path, timeout: float = 60.0,
                 port: int | None = None) -> Run:
    """Fork ``n`` learners of ``scenario`` (rendezvous at ``port``, default a free one); wait
    for all; collect exit codes and results."""
    out.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    ctx = multiprocessing.get_context("fork")
    t0 = time.monotonic()
    procs = [ctx.Process(target=_child, args=(scenario, r, n, port, out)) for r in range(n)]
    for p in procs:
        p.start()
    codes, errs, seconds = [], [], []
    for r, p in enumerate(procs):
        p.join(max(0.1, timeout - (time.monotonic() - t0)))
        if p.exitcode is None:
            _hang(procs, out, f"learner {r} still running after {timeout} s (hang)")
        codes.append(p.exitcode)
        seconds.append(time.monotonic() - t0)
        errs.append((out / f"err{r}.txt").read_text())
    results = []
    for r in range(n):
        f = out / f"{r}.pt"
        results.append(torch.load(f, weights_only=False) if f.exists() else None)
        if f.exists():
            f.unlink()
    return Run(codes, errs, results, seconds)


def _hang(procs: list, out: Path, message: str) -> None:
    """Fail with the Python stacks of the learners still running, after killing them all."""
    alive = {r: (out / f"err{r}.txt").stat().st_size for r, p in enumerate(procs)
             if p.exitcode is None}
    for r in alive:
        os.kill(procs[r].pid, signal.SIGUSR1)
    time.sleep(0.5)
    for p in procs:
        p.kill()
        p.join(5.0)
    stacks = ""
    for r, size in alive.items():
        with open(out / f"err{r}.txt", "rb") as f:
            f.seek(size)
            stacks += f"\n--- learner {r}, innermost frames first:\n"
            stacks += f.read(2500).decode(errors="replace")
    pytest.fail(message + stacks)


def running_stores() -> set[int]:
    """Pids of the elastic runs' store processes (named asrdist-store) running now; a zombie
    (ended, not yet reaped) does not count."""
    found = set()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        name, rest = stat[stat.find("(") + 1 : stat.rfind(")")], stat[stat.rfind(")") + 1 :]
        if name == "asrdist-store" and rest.split()[0] not in ("Z", "X"):
            found.add(int(entry))
    return found


def stores_end(before: set[int], limit: float = 10.0) -> None:
    """Wait until every store process started since ``before`` was read has ended."""
    deadline = time.monotonic() + limit
    while running_stores() - before:
        if time.monotonic() > deadline:
            pytest.fail(f"store process(es) {sorted(running_stores() - before)} still run "
                        f"{limit} s after the run")
        time.sleep(0.1)


def ok(run: Run) -> list[dict]:
    """The results, after checking every learner exited 0."""
    for r, (code, err) in enumerate(zip(run.codes, run.stderr, strict=True)):
        assert code == 0, f"learner {r} exited {code}:\n{err[-3000:]}"
    return run.results  # type: ignore[return-value]


def resumes_exactly(scenario: dict, checkpoint_at: int, out: Path) -> dict:
    """Run ``scenario`` on two learners with a checkpoint after step ``checkpoint_at``, then
    again resumed from it; assert the resumed run is the uninterrupted one bit for bit (the
    weights before the first step taken and the final ones) and return the strategy state
    learner 0 saved there."""
    whole = ok(run_learners({**scenario, "checkpoint_at": checkpoint_at}, 2, out))
    resumed = ok(run_learners({**scenario, "resume": True}, 2, out))
    for a, b in zip(whole, resumed, strict=True):
        assert torch.equal(a["before"], b["before"])
        assert torch.equal(a["final"], b["final"])
    return torch.load(out / "ckpt0.pt", weights_only=True)["strategy"]
