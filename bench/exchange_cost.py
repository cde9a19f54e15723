"""What one ADPSGD exchange of the paper-size BLSTM's weights (43 M floats, 172 MB) costs the
host, before and after the exchange was rebuilt on reused vectors and device arithmetic
(:mod:`asrdist.parallel.rules.staging`), and what it costs a GPU's compute stream.

Host part (CPU, two real learner processes over gloo on this machine): each learner holds the
paper-size BLSTM on CPU and runs ADPSGD's step hooks with no training in between: the active
one snapshots, starts an exchange, waits for it and merges it; the passive one publishes a
snapshot, then takes and merges what it was sent. Measured per exchange: process CPU time (all
threads: the exchange thread's arithmetic and gloo's), wall time and minor page faults (fresh
172 MB vectors fault in page by page). "before" runs the ``asrdist`` package of commit
:data:`BEFORE` (the code before the rebuild, extracted with ``git archive``; this file's
driver calls only what both versions have), "after" this tree's; "gloo swap alone" posts the
same two 172 MB transfers between vectors made once, with no arithmetic: the floor.

    .venv/bin/python -m bench.exchange_cost [--exchanges 20] [--trials 2] [--publish]

Compute-stream part (:func:`gpu_rows`, called by bench.gpu_check): one learner on the device
trains (forward, backward, SGD step) alone, then with ADPSGD's exchange in the background,
merging each exchange at the first step after it is done, never waiting for one; its partner, a
CPU process doing nothing else, serves or starts the exchanges. The difference in step time is
what the exchange costs the compute stream (the snapshot's gather, the merge, the copies'
share of the device); how many exchanges a step merges is the link's speed (gloo over TCP),
not the compute stream's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from bench.harness import extract
from bench.projection import CHUNK
from bench.results import publish, publish_option

REPO = Path(__file__).resolve().parents[1]
BEFORE = "99b4986"  # the last commit with the old exchange (fresh vectors, host arithmetic)
TIMEOUT_S = 300.0
MARK = "RESULT "


# -- the learner processes ----------------------------------------------------------------------


def _model(tiny: bool, device: str, seed: int) -> torch.nn.Module:
    from asrdist.models.blstm import BLSTM

    torch.manual_seed(seed)
    if tiny:
        return BLSTM(40, 120, layers=1, units=16).to(device)
    from bench.projection import paper_model

    return paper_model().to(device)


def _connect(job: dict[str, Any]) -> dist.TCPStore:
    store = dist.TCPStore("127.0.0.1", job["port"], 2, job["rank"] == 0,
                          timeout=timedelta(seconds=TIMEOUT_S))
    dist.init_process_group("gloo", store=store, rank=job["rank"], world_size=2,
                            timeout=timedelta(seconds=TIMEOUT_S))
    return store


def _engine(model: torch.nn.Module, rank: int, group: Any) -> tuple[Any, Any]:
    """A model's staging and its exchange on the ring of two (learner 1 active), as ADPSGD
    builds them, with what either version of asrdist offers."""
    from asrdist.parallel.processes.exchange import PairwiseExchange
    from asrdist.parallel.rules.staging import DeviceStaging

    staging = DeviceStaging(model)
    alloc = getattr(staging, "zeros", None) or staging.host_zeros  # after / before
    weights, ready = staging.snapshot(model)
    eng = PairwiseExchange(group=group, ranks=[0, 1], index=rank, weights=weights, ready=ready,
                           alloc=alloc, partner_of=lambda r: 0, timeout_s=TIMEOUT_S, rank=rank)
    return staging, eng


def _host_cost(job: dict[str, Any]) -> dict[str, Any]:
    """One learner of the host part: ``warmup`` exchanges, then ``exchanges`` timed."""
    from asrdist.parallel.processes.exchange import make_exchange_group

    _connect(job)
    rank, total = job["rank"], job["warmup"] + job["exchanges"]
    group = make_exchange_group([0, 1], TIMEOUT_S)
    model = _model(False, "cpu", rank)
    if job["wire"]:
        numel = sum(p.numel() for p in model.parameters())
        mine, theirs = torch.zeros(numel), torch.empty(numel)

        def step() -> int:
            peer = 1 - rank
            first = group.send([mine], peer, 0) if rank else group.recv([theirs], peer, 0)
            second = group.recv([theirs], peer, 1) if rank else group.send([mine], peer, 1)
            first.wait()
            second.wait()
            return 1
    else:
        staging, eng = _engine(model, rank, group)
        settle = getattr(staging, "before_update", lambda: None)  # after only

        def step() -> int:
            snapshot, ready = staging.snapshot(model)
            if eng.active:
                eng.start(snapshot, ready)
                settle()
                staging.add(model, eng.wait())
                return 1
            eng.publish(snapshot, ready)
            settle()
            while True:  # the passive's step ends with a merge
                delta, count = eng.take_pending()
                if delta is not None:
                    staging.add(model, delta)
                    return count
                time.sleep(0.001)

    done = 0
    while done < job["warmup"]:
        done += step()
    dist.barrier()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    while done < total:
        done += step()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
    if not job["wire"]:
        eng.finish()
    dist.barrier()
    dist.destroy_process_group()
    n = job["exchanges"]
    return {"cpu_ms": cpu / n * 1e3, "wall_ms": wall / n * 1e3, "faults": faults / n}


def _overlap(job: dict[str, Any]) -> dict[str, Any]:
    """The compute-stream part: learner ``measured`` trains on ``device``, alone and then with
    exchanges in the background; the other learner (CPU) only exchanges."""
    from asrdist.parallel.processes.exchange import make_exchange_group

    store = _connect(job)
    rank, tiny, steps = job["rank"], job["tiny"], job["steps"]
    group = make_exchange_group([0, 1], TIMEOUT_S)
    measured = rank == job["measured"]
    device = torch.device(job["device"] if measured else "cpu")
    model = _model(tiny, str(device), rank)
    out: dict[str, Any] = {}
    if not measured:
        store.wait(["go"])
        staging, eng = _engine(model, rank, group)
        while eng.active and not store.check(["stop"]):  # back to back until told to stop
            eng.start(*staging.snapshot(model))
            eng.wait()
        eng.finish()
        dist.barrier()
        dist.destroy_process_group()
        return out
    outputs = model.output.out_features
    batch = 4 if tiny else job["batch"]
    x = torch.randn(batch, CHUNK, model.lstm.input_size, device=device)
    y = torch.randint(0, outputs, (batch * CHUNK,), device=device)
    params = list(model.parameters())

    def timed(hooks: tuple[Any, Any] | None) -> tuple[float, int]:
        merged = 0
        for k in range(job["warmup"] + steps):
            if k == job["warmup"]:
                _sync(device)
                t0, merged = time.perf_counter(), 0
            if hooks is not None:
                staging, eng = hooks
                if not eng.active:
                    eng.publish(*staging.snapshot(model))
                elif not eng.in_flight:
                    eng.start(*staging.snapshot(model))
            loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, outputs), y)
            for p in params:
                p.grad = None
            loss.backward()
            if hooks is not None:
                staging.before_update()
                delta, count = None, 0
                if not eng.active:
                    delta, count = eng.take_pending()
                elif eng.finished:
                    delta, count = eng.wait(), 1
                if delta is not None:
                    staging.add(model, delta)
                    merged += count
            with torch.no_grad():  # SGD's step (torch.optim's first use imports dynamo: s)
                torch._foreach_add_(params, [p.grad for p in params], alpha=-1e-6)
        _sync(device)
        return (time.perf_counter() - t0) / steps, merged

    out["alone_s"], _ = timed(None)
    store.set("go", "1")
    hooks = _engine(model, rank, group)
    out["with_s"], out["merged"] = timed(hooks)
    out["role"] = "active" if hooks[1].active else "passive"
    store.set("stop", "1")
    if hooks[1].active and hooks[1].in_flight:
        hooks[1].wait()
    hooks[1].finish()
    dist.barrier()
    dist.destroy_process_group()
    return out


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- running them -------------------------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pairs(jobs: list[dict[str, Any]], asrdist_root: Path = REPO) -> list[list[dict]]:
    """Both learners of each job, all at once, as ``python -m bench.exchange_cost --worker``
    with ``asrdist`` imported from ``asrdist_root`` (started in a scratch directory, so the
    working directory does not put this tree's package first); their results, by rank."""
    inherited = filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))  # a bare
    env = {**os.environ,  # host's wheels directory stays on the path, after the two roots
           "PYTHONPATH": os.pathsep.join(dict.fromkeys([str(asrdist_root), str(REPO),
                                                        *inherited]))}
    with tempfile.TemporaryDirectory() as scratch:
        procs = []
        for job in jobs:
            job = {**job, "port": _free_port()}
            procs += [subprocess.Popen([sys.executable, "-m", "bench.exchange_cost",
                                        "--worker", json.dumps({**job, "rank": r})],
                                       cwd=scratch, env=env, stdout=subprocess.PIPE, text=True)
                      for r in range(2)]
        outs = [p.communicate(timeout=2 * TIMEOUT_S)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError(f"a learner failed (exit codes {[p.returncode for p in procs]})")
    results = [json.loads(next(line[len(MARK):] for line in out.splitlines()
                               if line.startswith(MARK))) for out in outs]
    return [results[i : i + 2] for i in range(0, len(results), 2)]


def _head() -> str:
    """This tree's commit, marked when asrdist.parallel differs from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "asrdist/parallel"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.strip()
    return head + (" + edits" if dirty else "")


def host_rows(exchanges: int, trials: int, before: str) -> list[str]:
    """The host part's table rows: before, after and the floor, the best of ``trials`` runs
    of each (alternating, as the machine may be shared)."""
    best: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        old = extract(before, Path(tmp))
        for _ in range(trials):
            for name, root, wire in ((f"before ({before})", old, False),
                                     (f"after ({_head()})", REPO, False),
                                     ("gloo swap alone (floor)", REPO, True)):
                [got] = run_pairs([{"kind": "host", "exchanges": exchanges, "warmup": 2,
                                    "wire": wire}], root)
                if name not in best or sum(g["cpu_ms"] for g in got) < \
                        sum(g["cpu_ms"] for g in best[name]):
                    best[name] = got
    rows = []
    for name, (passive, active) in best.items():
        rows.append(f"| {name} | {active['cpu_ms']:.0f} | {passive['cpu_ms']:.0f} | "
                    f"{max(active['wall_ms'], passive['wall_ms']):.0f} | "
                    f"{active['faults']:,.0f} | {passive['faults']:,.0f} |")
    return rows


HOST_HEAD = ["| code | active CPU ms | passive CPU ms | wall ms | active page faults | "
             "passive page faults |", "|---|---|---|---|---|---|"]


def gpu_rows(tiny: bool) -> list[str]:
    """Markdown: the compute stream's cost of the exchange, as a share of a training step, for
    a learner on the GPU in either role (``tiny``: a small BLSTM on CPU, a smoke test)."""
    device = "cpu" if tiny or not torch.cuda.is_available() else "cuda"
    steps, warmup, batch = (3, 1, 4) if tiny else (30, 3, 256)
    threads = 1 if tiny else max(1, (os.cpu_count() or 2) // 2)  # the CPU partner's passes
    jobs = [{"kind": "overlap", "measured": measured, "device": device, "tiny": tiny,
             "steps": steps, "warmup": warmup, "batch": batch, "threads": threads}
            for measured in (1, 0)]  # learner 1 is the active one
    # tiny: both at once (a smoke test, its times mean nothing); else one at a time
    pairs = run_pairs(jobs) if tiny else [p for job in jobs for p in run_pairs([job])]
    rows = []
    for job, pair in zip(jobs, pairs, strict=True):
        r = pair[job["measured"]]
        share, rate = r["with_s"] / r["alone_s"] - 1, r["merged"] / steps
        each = f"{share / rate:+.1%}" if rate else "n/a"
        rows.append(f"| {r['role']} | {r['alone_s'] * 1e3:.1f} | {r['with_s'] * 1e3:.1f} | "
                    f"{share:+.1%} | {rate:.2f} | {each} |")
    model = "a 1-layer BLSTM of 16 cells (tiny)" if tiny else "the paper-size BLSTM"
    return [f"ADPSGD's exchange on the compute stream: {model} on {device}, {batch} chunks of "
            f"{CHUNK} frames per step, {steps} steps after {warmup}, alone and with exchanges "
            "in the background (each merged at the first step after it is done; the partner "
            f"a CPU process of {threads} intra-op thread(s) that only exchanges). Goal: <= 5 % "
            "of a step per exchange (last column: the cost divided by the exchanges merged per "
            "step, which gloo's bandwidth sets).", "",
            "| role | step ms alone | step ms exchanging | cost on the step | exchanges "
            "merged per step | cost per exchange |", "|---|---|---|---|---|---|", *rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=20)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--before", default=BEFORE, help="commit of the 'before' code")
    publish_option(ap, __file__)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        job = json.loads(args.worker)
        torch.set_num_threads(job.get("threads", 1))
        result = _host_cost(job) if job["kind"] == "host" else _overlap(job)
        print(MARK + json.dumps(result), flush=True)
        return
    rows = host_rows(args.exchanges, args.trials, args.before)
    from bench.projection import paper_model

    numel = sum(p.numel() for p in paper_model().parameters())
    publish([
        "## ADPSGD exchange: host CPU time per exchange", "",
        f"{time.strftime('%Y-%m-%d')}, 2 shared CPU cores, 2 learner processes over gloo on "
        f"127.0.0.1, one intra-op thread each; the paper-size BLSTM's {numel / 1e6:.1f} M "
        f"weights ({numel * 4 / 1e6:.0f} MB) on CPU; per exchange: process CPU time (all "
        "threads), wall time, minor page faults; the best of "
        f"{args.trials} alternating runs of {args.exchanges} exchanges after 2 warm-up ones.",
        "",
        f"Command: `.venv/bin/python -m bench.exchange_cost --exchanges {args.exchanges} "
        f"--trials {args.trials} --publish`", "",
        *HOST_HEAD, *rows, "",
        f"1-minute load average {os.getloadavg()[0]:.1f} at the end (the machine was shared: "
        "CPU time is the robust figure, wall time is not). After: no vector is made per "
        "exchange (no page faults); the host passes left are the active side's gather, half "
        "difference (2) and merge, and the passive side's gather, served + pending, half "
        "difference (2), pending sum and merge. With the model on a GPU those run on the "
        "device and only the gloo swap (the floor) stays on the host: by construction, not "
        "measured here (no GPU; bench.gpu_check runs gpu_rows).",
    ], args.publish)


if __name__ == "__main__":
    main()
