"""One learner process for the multi-process tests: a small model trained with the trainer's
own step (asrdist.parallel.strategy.train_step), so the hooks run exactly as in training.

The tests fork these learners from the test process (torch is already imported there, so a
learner starts in milliseconds); ``python _learner.py SCENARIO_JSON RANK WORLD PORT OUT_DIR``
runs one by hand. Writes OUT_DIR/<rank>.pt with what the test checks.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

from asrdist.parallel.launch.rendezvous import rendezvous
from asrdist.parallel.processes.secret import SECRET_ENV
from asrdist.parallel.registry import make_strategy
from asrdist.parallel.rules.weights import flat_weights
from asrdist.parallel.strategy import Learner, Strategy, train_step
from asrdist.testing.sockets import listening


def make_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def batch(step: int, rank: int, size: int, same: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s share of the global batch of ``step`` (or the same data on every rank)."""
    g = torch.Generator().manual_seed(1000 + step)
    x, y = torch.randn(64, 4, generator=g), torch.randn(64, 3, generator=g)
    lo = 0 if same else rank * size
    return x[lo : lo + size], y[lo : lo + size]


def _flat_grad(model: torch.nn.Module) -> torch.Tensor | None:
    grads = [p.grad for p in model.parameters()]
    if any(g is None for g in grads):
        return None
    return torch.cat([g.reshape(-1) for g in grads]).clone()


def _instrument(strategy: Strategy, sc: dict, computed: list, applied: list) -> None:
    """Wrap ``after_backward``: simulated compute (``compute_s``) before it, and the gradients
    as backward left them and as the strategy hands them to the optimizer."""
    inner = strategy.after_backward
    sleep, record = sc.get("compute_s", 0.0), sc.get("record_grads", False)

    def after_backward(model: torch.nn.Module, step: int) -> None:
        if sleep:
            time.sleep(sleep)
        if record:
            computed.append(_flat_grad(model))
        inner(model, step)
        if record:
            applied.append(_flat_grad(model))

    strategy.after_backward = after_backward  # type: ignore[method-assign]


def _record_average(strategy: Strategy) -> list[torch.Tensor]:
    """Wrap the transport's final average: what this learner put in it (flat), in a list."""
    comm = strategy.comm  # type: ignore[attr-defined]
    inner, seen = comm.average_all_, []

    def average_all_(tensors: list[torch.Tensor]) -> None:
        seen.append(torch.cat([t.detach().reshape(-1) for t in tensors]).clone())
        inner(tensors)

    comm.average_all_ = average_all_
    return seen


def main() -> None:
    run(json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
        sys.argv[5])


def run(sc: dict, rank: int, world: int, port: int, out: str) -> None:
    """One learner of scenario ``sc``."""
    timeout = sc.get("timeout_s", 30.0)
    if "secrets" in sc:  # each learner's run secret, where a test gives them different ones
        os.environ[SECRET_ENV] = sc["secrets"][rank]
    if world > 1 or sc.get("init_world_1"):  # elastic: the store in a process of its own
        rendezvous("gloo", "127.0.0.1", port, rank, world, timeout,
                   elastic=sc.get("options", {}).get("elastic", False),
                   run_dir=sc.get("options", {}).get("out"))
    strategy = make_strategy(sc["algo"], Learner.current(), exchange_timeout=timeout,
                             distance_every=sc.get("dist_s", 0), **sc.get("options", {}))
    model = make_model(rank if sc.get("init") == "rank" else 0)
    ckpt = os.path.join(out, f"ckpt{rank}.pt")
    resumed_round = None
    if sc.get("resume"):
        state = torch.load(ckpt, weights_only=True)  # checkpoints are plain data
        model.load_state_dict(state["model"])
    wrapped = strategy.wrap_model(model)
    opt = torch.optim.SGD(wrapped.parameters(), lr=sc["lr"], momentum=sc.get("momentum", 0.0))
    start = 0
    if sc.get("resume"):
        opt.load_state_dict(state["opt"])
        strategy.load_state_dict(state["strategy"])
        start = state["step"]
        resumed_round = state["strategy"].get("round")
    history = [flat_weights(model)]
    if rank == sc.get("late_rank"):  # starts its first step late (the others' exchanges wait)
        time.sleep(sc.get("late_s", 0.5))
    computed, applied = [], []  # gradients from backward / as handed to the optimizer
    _instrument(strategy, sc, computed, applied)
    averaged = _record_average(strategy) if sc.get("record_average") else []
    steps = 0
    for step in range(start, sc["steps"]):
        if step == sc.get("kill_at") and rank == sc.get("kill_rank"):
            os.kill(os.getpid(), signal.SIGKILL)
        if step == sc.get("listening_at"):
            _record_listening(out, rank, port)
        if step == sc.get("freeze_at") and rank == sc.get("freeze_rank"):  # the test wakes it
            with open(os.path.join(out, "frozen.pid"), "w") as f:
                f.write(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGSTOP)
        x, y = batch(step, rank, sc.get("batch", 8), sc.get("same_data", False))
        train_step(strategy, wrapped, opt, step,
                   lambda m, x=x, y=y: torch.nn.functional.mse_loss(m(x), y))
        steps = step + 1
        if step + 1 == sc.get("checkpoint_at"):
            strategy.sync(wrapped)  # as the trainer does before a checkpoint
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "strategy": strategy.state_dict(), "step": step + 1}, ckpt)
        if sc.get("history"):
            history.append(flat_weights(model))
    before = flat_weights(model)
    metrics = strategy.metrics()
    strategy.finalize(wrapped)
    strategy.close()
    torch.save({"before": before, "final": flat_weights(model), "history": history,
                "metrics": metrics, "resumed_round": resumed_round,
                "computed": computed, "applied": applied, "steps": steps, "averaged": averaged,
                "state": strategy.state_dict()}, os.path.join(out, f"{rank}.pt"))
    if dist.is_initialized():
        dist.destroy_process_group()  # ``wrapped`` (a DDP wrapper for ssgd) is still alive here
    if sc.get("collective_at_exit"):
        _collective_at_exit(wrapped, rank)


def _record_listening(out: str, rank: int, port: int) -> None:
    """Write OUT/listening<rank>.json: the TCP sockets this learner listens on and, learner
    0, those of the run's store process (the asrdist-store process listening on ``port``)."""
    pids = [os.getpid()]
    if rank == 0:
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/comm") as f:
                    named = f.read().strip() == "asrdist-store"
                if named and any(p == port for _, p in listening(int(entry))):
                    pids.append(int(entry))
            except OSError:  # ended meanwhile, or not ours to read
                continue
    with open(os.path.join(out, f"listening{rank}.json"), "w") as f:
        json.dump({str(pid): sorted(listening(pid)) for pid in pids}, f)


def _collective_at_exit(wrapped: torch.nn.Module, rank: int) -> None:
    """Start a collective on the DDP wrapper's group, its tensor dropped by Python at once:
    the gloo worker that finishes it needs the GIL to free the tensor. ``run`` then returns and
    drops the wrapper while the collective still runs on learner 0 (learner 1 joins a second
    late), which makes the rare end-of-run race (a worker slow to free the last collective's
    tensor) certain: learner 0 exits only if whatever frees the group does not hold the GIL
    while it waits for the worker.
    """
    group = wrapped.process_group  # still alive: the wrapper holds it
    if rank == 1:
        time.sleep(1.0)
    group.allreduce([torch.ones(8)])  # the Work and the tensor are dropped at once

if __name__ == "__main__":
    main()
