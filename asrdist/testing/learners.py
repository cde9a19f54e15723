"""Learner processes for tests and benchmarks: ``n`` children in one gloo process group, each
running a function of its rank and handing back what it returns.

    rates = launch(measure, 4, "adpsgd-random", steps)   # measure(rank, n, algo, steps)
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import secrets
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from asrdist.parallel.launch.rendezvous import free_port
from asrdist.parallel.processes.secret import SECRET_ENV


def _child(fn: Callable[..., Any], rank: int, n: int, port: int, q: Any, args: tuple,
           addr: str, setup: Callable[[int], None] | None, timeout_s: float,
           run_secret: str) -> None:
    torch.set_num_threads(1)
    os.environ[SECRET_ENV] = run_secret  # as a launcher hands it over: the signed messages
    if setup is not None:
        setup(rank)
    dist.init_process_group("gloo", init_method=f"tcp://{addr}:{port}", rank=rank,
                            world_size=n, timeout=timedelta(seconds=timeout_s))
    q.put((rank, fn(rank, n, *args)))
    dist.destroy_process_group()


def launch(fn: Callable[..., Any], n: int, *args: Any, addr: str = "127.0.0.1",
           setup: Callable[[int], None] | None = None, timeout_s: float = 600,
           start: str = "fork") -> list[Any]:
    """Run ``fn(rank, n, *args)`` in ``n`` learner processes (one torch thread each, a gloo
    group at ``addr`` whose collectives time out after ``timeout_s``); their results by rank,
    all within ``timeout_s`` of the start, else RuntimeError (at once where a learner fails).
    ``setup(rank)`` runs in each child before the rendezvous (e.g. entering a network
    namespace); ``start`` is the multiprocessing start method ("spawn" where the parent has
    started CUDA: ``fn`` must then be picklable)."""
    ctx = multiprocessing.get_context(start)
    q = ctx.Queue()
    port = free_port()
    run_secret = secrets.token_hex(16)
    procs = [ctx.Process(target=_child,
                         args=(fn, r, n, port, q, args, addr, setup, timeout_s, run_secret))
             for r in range(n)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    out: dict[int, Any] = {}
    try:
        while len(out) < n:
            try:
                rank, result = q.get(timeout=0.2)
                out[rank] = result
            except queue.Empty:
                if any(p.exitcode for p in procs) or time.monotonic() > deadline:
                    break  # a learner died, or one never reported
        for p in procs:
            p.join(max(0.1, deadline - time.monotonic()))
    finally:  # a learner that failed takes the others down with it
        for p in procs:
            if p.exitcode is None:
                p.kill()
                p.join()
    codes = [p.exitcode for p in procs]
    if any(codes) or len(out) < n:
        raise RuntimeError(f"learners: exit codes {codes}, results from ranks {sorted(out)}")
    return [out[r] for r in range(n)]
