"""Study 1: how large a global batch each strategy takes before its held-out CE falls more than
2 % behind the single-learner baseline at equal epochs, on the many-learner simulator.

Learning-rate rule: linear scaling from the recipe, ``lr = lr_ref x B / 256`` at global batch B
(lr_ref 0.1, momentum 0.9, conf/train_blstm.yaml); the largest batch also runs at
``--lr-factors`` times that rule and keeps its best (linear scaling overshoots first there), and
the baseline gets a sweep of 0.5, 1 and 2, so no strategy loses to a rate tuned for another.
Per-learner batches below ``--min-batch`` are skipped (they cost the most host time).
Equally fast learners; ma averages every 8 steps; hadpsgd has super-learners of 4 on a random
ring.

    .venv/bin/python -m bench.studies.large_batch --data DIR --targets DIR
        [--cache DIR] [--max-utts N] [--epochs E] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import statistics

from asrdist.simulate.experiment import RunSpec
from asrdist.simulate.speed import SpeedModel
from bench.results import publish
from bench.studies.common import REPO, Runner, corpus_options, final_ce, small_blstm
from bench.studies.figure import write_png

STRATEGIES = {
    "ssgd": {}, "ma": {"avg_period": 8}, "adpsgd-fixed": {}, "adpsgd-random": {},
    "adpsgd-delay1": {}, "hadpsgd": {"learners_per_node": 4, "hadpsgd_variant": "random"},
}
SPEED = SpeedModel(compute_s=1.0, update_s=0.25, latency_s=0.6)


def best(runner: Runner, args, algo: str, n: int, global_batch: int, seed: int = 0,
         factors: list[float] | None = None) -> tuple[float, float]:
    """(held-out CE, lr) of the best learning rate of the sweep."""
    out = []
    top = args.baseline_batch * max(args.multiples)
    for f in factors or (args.lr_factors if global_batch == top else [1.0]):
        lr = f * args.lr_ref * global_batch / 256
        spec = RunSpec(algo, n, global_batch // n, args.epochs, lr, 0.9,
                       model=small_blstm(), options=STRATEGIES.get(algo, {}), seed=seed,
                       evals=1)
        res = runner(spec, SPEED)
        out.append((final_ce(res), lr))
        print(algo, n, global_batch, seed, round(lr, 4), round(out[-1][0], 4), flush=True)
    return min(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus_options(ap)
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--baseline-batch", type=int, default=16)
    ap.add_argument("--multiples", type=int, nargs="+", default=[4, 16, 64])
    ap.add_argument("--learners", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--min-batch", type=int, default=4)
    ap.add_argument("--lr-ref", type=float, default=0.1)
    ap.add_argument("--lr-factors", type=float, nargs="+", default=[0.5, 1.0])
    ap.add_argument("--seeds", type=int, default=2, help="seeds at the largest batch")
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    runner = Runner(args.data, args.targets, args.cache, args.max_utts)
    b0 = args.baseline_batch
    base_ce, base_lr = best(runner, args, "single", 1, b0, factors=[0.5, 1.0, 2.0])
    rows = {}
    for n in args.learners:  # the first learner count sweeps; the others at the largest batch
        for algo in args.strategies:
            for m in args.multiples if n == args.learners[0] else [max(args.multiples)]:
                if b0 * m >= args.min_batch * n:
                    rows[algo, n, b0 * m] = best(runner, args, algo, n, b0 * m)
    top = b0 * max(args.multiples)
    spread = {}
    for algo in args.strategies:
        ces = [rows[algo, args.learners[0], top][0]]
        for seed in range(1, args.seeds):
            ces.append(best(runner, args, algo, args.learners[0], top, seed=seed,
                            factors=[rows[algo, args.learners[0], top][1] * 256 / top
                                     / args.lr_ref])[0])
        spread[algo] = ces
    plot(rows, base_ce, args, REPO / "bench/studies/large_batch.png")
    publish(section(args, runner, base_ce, base_lr, rows, spread), args.out)


def plot(rows, base_ce, args, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.learners), figsize=(5 * len(args.learners), 4),
                             squeeze=False)
    for ax, n in zip(axes[0], args.learners, strict=True):
        for algo in args.strategies:
            pts = sorted((b, ce) for (a, nn, b), (ce, _) in rows.items() if a == algo and nn == n)
            ax.semilogx([p[0] for p in pts], [p[1] for p in pts], "o-", label=algo, base=2)
        ax.axhline(base_ce, color="k", lw=0.8, label="single learner")
        ax.axhline(base_ce * 1.02, color="k", lw=0.8, ls="--", label="+2 %")
        ax.set_xlabel("global batch (chunks)")
        ax.set_ylabel(f"held-out CE after {args.epochs} epochs")
        ax.set_title(f"{n} learners", fontsize=9)
        ax.legend(fontsize=7)
    write_png(fig, path)


def section(args, runner, base_ce, base_lr, rows, spread) -> list[str]:
    b0 = args.baseline_batch
    lines = [
        "## Study 1: large batch (simulator)",
        "",
        "Command: `.venv/bin/python -m bench.studies.large_batch --data DATA --targets TARGETS "
        f"--max-utts {args.max_utts} --epochs {args.epochs} --hours {args.hours} --out "
        f"bench/RESULTS.md` (`recipes/mini/run.sh --stop-stage 3 --hours {args.hours}`). "
        f"{len(runner.pool.train)} training chunks of 21 frames, 100 held-out utterances, a "
        f"{small_blstm().layers}x{small_blstm().units} BLSTM, {args.epochs} epochs. lr = "
        f"factor x {args.lr_ref} x B / 256, factor 1, and {args.lr_factors} at the largest "
        f"batch (best kept; baseline: 0.5, 1, 2); per-learner batch at least {args.min_batch}. "
        f"Single-learner baseline at batch {b0}: CE {base_ce:.4f} (lr "
        f"{base_lr:.3g}). Plot: `bench/studies/large_batch.png`. Host time {runner.host_s:.0f} s "
        "(runs not in the cache) on the shared 2-core machine.",
        "",
        "| strategy | learners | " + " | ".join(f"B={b0 * m} ({m}x)" for m in args.multiples)
        + " | largest B within 2 % |",
        "|---|---|" + "---|" * (len(args.multiples) + 1),
    ]
    for n in args.learners:
        for algo in args.strategies:
            cells, ok = [], None
            for m in args.multiples:
                got = rows.get((algo, n, b0 * m))
                cells.append("-" if got is None else f"{got[0]:.4f} (lr {got[1]:.3g})")
                if got is not None and got[0] <= 1.02 * base_ce:
                    ok = b0 * m
            lines.append(f"| {algo} | {n} | " + " | ".join(cells) + f" | {ok or 'none'} |")
    top = b0 * max(args.multiples)
    lines += ["", f"Seeds at B={top}, {args.learners[0]} learners (best lr of seed 0): "
              "mean +- standard deviation of the held-out CE", "",
              "| strategy | seeds | mean | sd |", "|---|---|---|---|"]
    for algo, ces in spread.items():
        sd = statistics.stdev(ces) if len(ces) > 1 else 0.0
        lines.append(f"| {algo} | {len(ces)} | {statistics.mean(ces):.4f} | {sd:.4f} |")
    return lines


if __name__ == "__main__":
    main()
