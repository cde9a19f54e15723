"""Study 3: delay-by-one against the fixed and random rings with equally fast learners, and the
mixing of each ring as the number of learners grows, on the many-learner simulator.

Part 1, mixing: learners start from different weights and only average (lr 0, equal speeds,
so every step is one round of the ring schedule). The measured spectral gap is the asymptotic
per-round contraction of the squared distance d to the learners' mean,
``1 - (d_R / d_{R/2}) ** (2 / (R - R/2))`` over the second half of the rounds (the fast modes
have died out by then), beside ``rings.expected_mixing_gap`` (1 - lambda_2 of the mean of
W^T W).

Part 2, training: the variants at equal epochs over learner counts and batch sizes, then the
runs that tell why delay-by-one loses (momentum, learning rate, and the other reading of the
rule: averaging one step late with a fresh gradient, ``adpsgd-delayavg``).

    .venv/bin/python -m bench.studies.delay1_mixing --data DIR --targets DIR
        [--cache DIR] [--max-utts N] [--publish]
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from asrdist.parallel.rules import rings
from asrdist.simulate.experiment import RunSpec
from asrdist.simulate.run import simulate
from asrdist.simulate.speed import SpeedModel
from asrdist.simulate.table import final_ce
from bench.results import generated, publish, publish_option
from bench.studies.common import (
    STUDY_DEFAULTS,
    corpus_options,
    study_runs,
    study_spec,
)
from bench.studies.figure import write_png

SIZES = (4, 8, 16, 32, 64, 128)
# equally fast learners: an exchange takes 60 % of forward+backward, optimizer+data 25 %
SPEED = SpeedModel(compute_s=1.0, update_s=0.25, latency_s=0.6)


def measured_gap(kind: str, n: int, rounds: int) -> float:
    """Per-round contraction of the squared distance to the mean, as a gap."""
    def make(i: int) -> torch.nn.Module:
        torch.manual_seed(i)
        return torch.nn.Linear(8, 8)

    def no_loss(i: int, k: int, model: torch.nn.Module) -> torch.Tensor:
        return model.weight.sum() * 0.0

    res = simulate(f"adpsgd-{kind}", n, rounds, make,
                   lambda m: torch.optim.SGD(m.parameters(), lr=0.0), no_loss,
                   keep_history=True, options={"seed": 1})
    start = torch.stack([torch.cat([p.detach().reshape(-1) for p in make(i).parameters()])
                         for i in range(n)]).double()

    def dist(w: torch.Tensor) -> float:
        return float((w - w.mean(0)).norm(dim=1).pow(2).mean().sqrt())

    d0, ds = dist(start), []
    for r in range(rounds):
        ds.append(dist(torch.stack([res.history[i][r] for i in range(n)]).double()))
        if ds[-1] / d0 < 1e-5:  # before float32 rounding dominates
            break
    half = len(ds) // 2
    return 1.0 - (ds[-1] / ds[half - 1]) ** (2.0 / (len(ds) - half))


def mixing(rounds: int) -> list[dict]:
    rows = []
    for n in SIZES:
        row = {"n": n}
        for kind in ("fixed", "random"):
            row[f"{kind}_theory"] = rings.expected_mixing_gap(kind, n, rounds=64, seed=1)
            row[f"{kind}_measured"] = measured_gap(kind, n, rounds)
        rows.append(row)
        print(row, flush=True)
    return rows


def grid(args: argparse.Namespace) -> list[tuple[str, RunSpec]]:
    """(label, spec): the variants over learners x batch, then the diagnosis runs."""
    out = []
    for n in args.learners:
        for b in args.batches:
            for algo in ("adpsgd-fixed", "adpsgd-random", "adpsgd-delay1"):
                lr = args.lr * n * b / args.lr_ref_batch  # linear scaling (Goyal et al.)
                out.append(("main", study_spec(algo=algo, learners=n, batch_size=b,
                                               epochs=args.epochs, lr=lr, evals=args.evals)))
    n, b = args.learners[-1], args.batches[-1]
    base = args.lr * n * b / args.lr_ref_batch
    for algo in ("adpsgd-fixed", "adpsgd-delay1", "adpsgd-delayavg"):
        # the same step size without momentum (lr x 1/(1-m)), and half the learning rate
        for momentum, lr in ((0.9, base), (0.0, base * 10), (0.9, base / 2)):
            out.append(("diag", study_spec(algo=algo, learners=n, batch_size=b,
                                           epochs=args.epochs, lr=lr, momentum=momentum,
                                           evals=args.evals)))
    return out


def plot(mix: list[dict], runs: list[tuple[RunSpec, dict]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for kind, colour in (("fixed", "C0"), ("random", "C1")):
        a.loglog([r["n"] for r in mix], [r[f"{kind}_theory"] for r in mix], "-", color=colour,
                 label=f"{kind}: expected_mixing_gap")
        a.loglog([r["n"] for r in mix], [r[f"{kind}_measured"] for r in mix], "o", color=colour,
                 label=f"{kind}: measured (simulator, lr 0)")
    a.set_xlabel("learners")
    a.set_ylabel("spectral gap 1 - lambda_2")
    a.legend(fontsize=8)
    n, bsz = runs[-1][0].learners, runs[-1][0].batch
    for spec, res in runs:
        if spec.learners == n and spec.batch == bsz:
            xs = [r["epochs"] for r in res["records"]]
            ys = [r["heldout_ce"] for r in res["records"]]
            b.plot(xs, ys, marker=".",
                   label=f"{spec.algo} m={spec.optim.momentum} lr={spec.schedule.lr:.3g}")
    b.set_xlabel("epochs")
    b.set_ylabel("held-out CE (learners' mean)")
    b.set_title(f"{n} learners x {bsz} chunks", fontsize=9)
    b.legend(fontsize=6)
    write_png(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus_options(ap)
    ap.add_argument("--learners", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--lr-ref-batch", type=int, default=256)
    ap.add_argument("--evals", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=200)
    publish_option(ap, __file__)
    args = ap.parse_args()
    t0 = time.perf_counter()
    mix = mixing(args.rounds)
    mix_s = time.perf_counter() - t0
    runner = study_runs(args.data, args.targets, args.cache, args.max_utts)
    runs = []
    for label, spec in grid(args):
        res = runner(spec, SPEED)
        runs.append((spec, res))
        print(label, spec.algo, spec.learners, spec.batch, spec.optim.momentum,
              round(spec.schedule.lr, 4), round(final_ce(res), 4), res["summary"]["staleness"],
              flush=True)
    png = generated(__file__, ".png")
    plot(mix, runs, str(png))
    publish(section(args, mix, runs, mix_s, runner), args.publish)


def section(args, mix, runs, mix_s, runner) -> list[str]:
    chunks = len(runner.pool.train)
    lines = [
        "## Study 3: delay-by-one and mixing (simulator)",
        "",
        "Command: `.venv/bin/python -m bench.studies.delay1_mixing --data DATA --targets "
        f"TARGETS --max-utts {args.max_utts} --epochs {args.epochs} --publish` "
        f"(DATA, TARGETS: `recipes/mini/run.sh --stop-stage 3 --hours {args.hours}`'s "
        f"train_fbank and mono_pdf). {chunks} training chunks of 21 frames, 100 held-out "
        "utterances; "
        f"a {STUDY_DEFAULTS.model.layers}x{STUDY_DEFAULTS.model.units} BLSTM; equally fast "
        "learners "
        f"(compute {SPEED.compute_s} s, optimizer+data {SPEED.update_s} s, exchange "
        f"{SPEED.latency_s} s per step). Plot: `bench/results/delay1_mixing.png`. Host time: "
        f"mixing {mix_s:.0f} s, training {runner.host_s:.0f} s (runs not in the cache), on "
        "the shared 2-core machine.",
        "",
        "### Spectral gap of the rings as N grows",
        "",
        f"Measured: up to {args.rounds} rounds at lr 0 from different starting weights (stops "
        "at a 1e-5 relative distance), rate over the second half. delay1 uses the fixed ring's "
        "schedule, so its mixing is the fixed ring's.",
        "",
        "| learners | fixed: theory | fixed: measured | random: theory | random: measured |",
        "|---|---|---|---|---|",
    ]
    for r in mix:
        lines.append(f"| {r['n']} | {r['fixed_theory']:.2e} | {r['fixed_measured']:.2e} | "
                     f"{r['random_theory']:.2e} | {r['random_measured']:.2e} |")
    lines += [
        "",
        f"### Held-out CE after {args.epochs} epoch(s), momentum 0.9, lr "
        f"{args.lr} x global batch / {args.lr_ref_batch}",
        "",
        "| learners | batch/learner | global batch | lr | fixed | random | delay1 | "
        "delay1 staleness |",
        "|---|---|---|---|---|---|---|---|",
    ]
    main = [(s, r) for s, r in runs if s.optim.momentum == 0.9 and s.algo != "adpsgd-delayavg"]
    for n in args.learners:
        for b in args.batches:
            got = {s.algo: r for s, r in main
                   if s.learners == n and s.batch == b
                   and math.isclose(s.schedule.lr, args.lr * n * b / args.lr_ref_batch)}
            stale = got["adpsgd-delay1"]["summary"]["staleness"]
            lines.append(
                f"| {n} | {b} | {n * b} | {args.lr * n * b / args.lr_ref_batch:.3g} | "
                f"{final_ce(got['adpsgd-fixed']):.4f} | {final_ce(got['adpsgd-random']):.4f} | "
                f"{final_ce(got['adpsgd-delay1']):.4f} | {stale} |")
    n, b = args.learners[-1], args.batches[-1]
    lines += ["", f"### Why delay1 loses: {n} learners x {b} chunks", "",
              "| strategy | momentum | lr | held-out CE | simulated time s |",
              "|---|---|---|---|---|"]
    seen = set()
    for s, r in runs:
        key = (s.algo, s.optim.momentum, round(s.schedule.lr, 6))
        if s.learners != n or s.batch != b or key in seen:
            continue
        seen.add(key)
        lines.append(f"| {s.algo} | {s.optim.momentum} | {s.schedule.lr:.3g} | {final_ce(r):.4f} | "
                     f"{r['summary']['time_s']:.0f} |")
    return lines


if __name__ == "__main__":
    main()
