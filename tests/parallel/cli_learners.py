"""Two learners of an asrdist CLI forked from the test process (torch already imported, so
each starts in milliseconds), rendezvousing through a torchrun-style environment; each writes
its stderr to OUT/err<rank>.txt."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from asrdist.cli.train import main as train_main
from asrdist.parallel.launch import free_port

Main = Callable[[list[str]], None]


def _learner(main: Main, args: list[str], rank: int, port: int, err: Path) -> None:
    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)
    torch.set_num_threads(1)
    main(args)


def fork_learners(main: Main, args: list[str], out: Path) -> list[multiprocessing.Process]:
    """Start 2 learners of the command ``main`` (a click command) with ``args``."""
    port = free_port()
    ctx = multiprocessing.get_context("fork")
    out.mkdir(parents=True, exist_ok=True)
    procs = [ctx.Process(target=_learner, args=(main, args, r, port, out / f"err{r}.txt"))
             for r in range(2)]
    for p in procs:
        p.start()
    return procs


def start_learners(corpus: tuple[Path, Path], out: Path, algo: str,
                   *options: str) -> list[multiprocessing.Process]:
    """Start 2 learners of ``asrdist-train --algo ALGO OPTIONS`` on ``corpus`` into ``out``."""
    data, targets = corpus
    args = ["--data", str(data), "--targets", str(targets), "--out", str(out), "--algo", algo,
            *options]
    return fork_learners(train_main, args, out)
