"""Two learners of an asrdist CLI forked from the test process (torch already imported, so
each starts in milliseconds), rendezvousing through a torchrun-style environment; each writes
its stderr to OUT/err<rank>.txt."""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from asrdist.cli.train import main as train_main
from asrdist.parallel.launch.rendezvous import free_port
from asrdist.train.metrics import metrics_path, read_metrics

Main = Callable[[list[str]], None]

# asrdist-train options of a model small enough that a test's learners take seconds; each test
# module adds its own run length, checkpoint and timeout options.
TINY_MODEL = ["--layers=1", "--units=8", "--chunk-len=10", "--batch-size=4", "--shuffle-buffer=16",
              "--heldout-utts=2", "--lr-ref-batch=8"]


def _learner(main: Main, args: list[str], rank: int, port: int, err: Path, world: int) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)
    torch.set_num_threads(1)
    main(args)


def fork_learners(main: Main, args: list[str], out: Path, world: int = 2,
                  port: int | None = None) -> list[multiprocessing.Process]:
    """Start ``world`` learners of the command ``main`` (a click command) with ``args``
    (rendezvous at ``port``, default a free one)."""
    port = port or free_port()
    ctx = multiprocessing.get_context("fork")
    out.mkdir(parents=True, exist_ok=True)
    procs = [ctx.Process(target=_learner, args=(main, args, r, port, out / f"err{r}.txt", world))
             for r in range(world)]
    for p in procs:
        p.start()
    return procs


def start_learners(corpus: tuple[Path, Path], out: Path, algo: str,
                   *options: str, world: int = 2,
                   port: int | None = None) -> list[multiprocessing.Process]:
    """Start ``world`` learners of ``asrdist-train --algo ALGO OPTIONS`` on ``corpus`` into
    ``out`` (rendezvous at ``port``, default a free one)."""
    data, targets = corpus
    args = ["--data", str(data), "--targets", str(targets), "--out", str(out), "--algo", algo,
            *options]
    return fork_learners(train_main, args, out, world, port)


def join_learners(procs: list, out: Path, limit: float = 60.0) -> list[int]:
    """The learners' exit codes; fails, killing them, if one still runs after ``limit`` s."""
    t0 = time.monotonic()
    for p in procs:
        p.join(max(0.1, limit - (time.monotonic() - t0)))
    if any(p.exitcode is None for p in procs):
        for p in procs:
            p.kill()
        pytest.fail(f"a learner still runs after {limit} s (hang): " + " | ".join(
            (out / f"err{r}.txt").read_text()[-800:] for r in range(len(procs))))
    return [p.exitcode for p in procs]


def train_records(out: Path, rank: int) -> list[dict]:
    path = metrics_path(out, rank)
    return [r for r in read_metrics(path) if r["kind"] == "train"] if path.exists() else []


def when_training(out: Path, procs: list, step: int) -> None:
    """Wait until learner 0 logged ``step`` steps (a signal then lands mid-run)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        records = train_records(out, 0)
        if records and records[-1]["step"] >= step:
            return
        if any(p.exitcode is not None for p in procs):
            pytest.fail("a learner ended before the signal: "
                        + (out / "err0.txt").read_text()[-1500:])
        time.sleep(0.02)
    pytest.fail(f"learner 0 did not reach step {step}")


def wait_for(what: str, ok: Callable[[], bool], limit: float = 60.0) -> None:
    """Poll ``ok`` until it holds; fail naming ``what`` after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while not ok():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {limit} s")
        time.sleep(0.05)
