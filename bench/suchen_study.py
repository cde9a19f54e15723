"""Su & Chen's question on the mini corpus: does NG-SGD and RBM pretraining help model
averaging, with 2, 4 and 8 learners and several averaging periods?

Every run is the real CLI under mpiexec (one torch thread per learner)::

    OMP_NUM_THREADS=1 mpiexec -n N asrdist-train --config recipes/mini/conf/train_dnn_suchen.yaml \\
        --data DATA --targets TARGETS --out OUT/<variant>_x<N>_k<K> --algo ma --avg-period K \\
        --optimizer sgd|ngsgd [--init-dbn DBN] --hidden-layers L --hidden-units U \\
        --epochs 1 --max-steps S --heldout-every H ...

(``--algo single`` for N = 1). All runs see the same number of frames (``--fraction`` of an
epoch: S = fraction x steps per epoch of N learners), the same per-learner batch, Kaldi's
averaging rate rule (N x lr decaying to lr_final) and the same seed. The four variants are
plain SGD from random weights, NG-SGD, RBM-pretrained SGD and RBM-pretrained NG-SGD (the
paper's setup); the RBM stack (``--dbn``, asrdist-pretrain-rbm) is one for all runs.
Held-out CE is learner 0's, sampled every H steps, H a multiple of K, so right after an
average, when learner 0 holds the learners' mean; the end figures are the exported final.pt
(the average). Speed-up: steps of the 1-learner run of the same variant to reach the target
CE, over steps of the N-learner run (linear interpolation between samples); the ideal is N.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from asrdist.data.dataset import load_corpus, steps_per_epoch
from asrdist.train.metrics import read_metrics
from bench.harness import run_training
from bench.results import generated, publish, publish_option, scrub, shown
from bench.strategies_study import score_final
from bench.studies.figure import write_png

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "recipes/mini/conf/train_dnn_suchen.yaml"
HEADING = "## Su & Chen on the mini corpus: NG-SGD and RBM pretraining inside model averaging"
VARIANTS = {"sgd": ("sgd", False), "ngsgd": ("ngsgd", False), "rbm+sgd": ("sgd", True),
            "rbm+ngsgd": ("ngsgd", True)}


def run_one(args: argparse.Namespace, variant: str, learners: int, period: int) -> dict:
    optimizer, rbm = VARIANTS[variant]
    out = args.out / f"{variant}_x{learners}_k{period}"
    corpus = load_corpus(str(args.data), str(args.targets), 0.05)
    rows = np.arange(len(corpus.utts) - args.heldout_utts)
    per_epoch = steps_per_epoch(corpus, rows, 8, args.batch_size, 0, 0, learners)
    steps = max(period, round(args.fraction * per_epoch))
    every = period * max(1, round(steps / args.samples / period))
    cmd = [sys.executable, "-m", "asrdist.cli.train", "--config", str(CONFIG),
           "--data", str(args.data), "--targets", str(args.targets), "--out", str(out),
           "--algo", "ma" if learners > 1 else "single", "--avg-period", str(period),
           "--optimizer", optimizer, "--hidden-layers", str(args.hidden_layers),
           "--hidden-units", str(args.hidden_units), "--batch-size", str(args.batch_size),
           "--epochs", "1", "--max-steps", str(steps), "--heldout-every", str(every),
           "--heldout-utts", str(args.heldout_utts), "--lr", str(args.lr),
           "--lr-final", str(args.lr_final), "--avg-frames", "0", "--checkpoint-every", "0"]
    if rbm:
        cmd += ["--init-dbn", str(args.dbn)]
    if learners > 1:
        cmd = ["mpiexec", "-n", str(learners), *cmd]
    proc, seconds = run_training(cmd, out)
    row = {"variant": variant, "learners": learners, "period": period, "steps": steps,
           "seconds": seconds,
           "cmd": " ".join(cmd).replace(sys.executable, "python")}
    if proc.returncode != 0:
        if "loss is" not in proc.stderr:
            raise SystemExit(f"{out.name} failed:\n{proc.stderr[-3000:]}")
        return {**row, "diverged": True, "curve": [], "ce": float("nan"), "acc": float("nan")}
    curve = [(r["step"], r["heldout_ce"]) for r in read_metrics(out / "metrics.jsonl")
             if r["kind"] == "heldout"]
    ce, acc = score_final(out)
    return {**row, "diverged": False, "curve": curve, "ce": ce, "acc": acc}


def steps_to(curve: list[tuple[int, float]], target: float) -> float | None:
    """The first step at which the held-out CE reaches ``target`` (interpolated)."""
    prev = (0, float("inf"))
    for step, ce in curve:
        if ce <= target:
            if prev[1] == float("inf"):
                return float(step)
            return prev[0] + (step - prev[0]) * (prev[1] - target) / (prev[1] - ce)
        prev = (step, ce)
    return None


def value_at(curve: list[tuple[int, float]], step: float) -> float:
    """The held-out CE at ``step`` (interpolated between samples)."""
    for (s0, c0), (s1, c1) in zip(curve, curve[1:], strict=False):
        if s0 <= step <= s1:
            return c0 + (c1 - c0) * (step - s0) / (s1 - s0)
    return curve[-1][1]


def targets(rows: list[dict]) -> dict[str, float]:
    """Per variant: the CE its 1-learner run had after half of its steps."""
    return {r["variant"]: value_at(r["curve"], r["steps"] / 2) for r in rows
            if r["learners"] == 1 and r["curve"]}


def table(rows: list[dict]) -> list[str]:
    goal = targets(rows)
    ones = {r["variant"]: steps_to(r["curve"], goal[r["variant"]]) for r in rows
            if r["learners"] == 1 and r["variant"] in goal}
    lines = ["| learners | avg period K (steps) | variant | steps per learner | wall s "
             "| held-out CE (final.pt) | frame acc | target CE | steps to target "
             "| speed-up (ideal N) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        k = r["period"] if r["learners"] > 1 else "-"
        head = f"| {r['learners']} | {k} | {r['variant']} | {r['steps']} | {r['seconds']:.0f} |"
        if r["diverged"]:
            lines.append(f"{head} diverged | - | - | - | - |")
            continue
        target = goal.get(r["variant"])
        reach = steps_to(r["curve"], target) if target is not None else None
        base = ones.get(r["variant"])
        speed = f"{base / reach:.2f}" if reach and base else "not reached"
        lines.append(f"{head} {r['ce']:.4f} | {r['acc']:.4f} | "
                     f"{f'{target:.3f}' if target is not None else '-'} | "
                     f"{f'{reach:.0f}' if reach else '-'} | {speed} |")
    return lines


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    learners = sorted({r["learners"] for r in rows})
    fig, axes = plt.subplots(1, len(learners), figsize=(4 * len(learners), 3.4), sharey=True,
                             squeeze=False)
    axes = axes[0]
    for ax, n in zip(axes, learners, strict=True):
        for r in rows:
            if r["learners"] == n and r["curve"]:
                xs = [s * n for s, _ in r["curve"]]  # minibatches of all learners: data seen
                label = r["variant"] + (f" K={r['period']}" if n > 1 else "")
                ax.plot(xs, [c for _, c in r["curve"]], label=label)
        ax.set_title(f"{n} learner(s)")
        ax.set_xlabel("minibatches over all learners")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("held-out CE")
    write_png(fig, path)


def run_all(args: argparse.Namespace) -> list[dict]:
    plan = [(v, 1, 1) for v in args.variants]
    plan += [(v, n, k) for n in args.learners for k in args.periods for v in args.variants]
    if args.learners:
        plan += [(v, max(args.learners), k) for k in args.sweep for v in args.variants]
    rows = []
    for variant, n, k in plan:
        row = run_one(args, variant, n, k)
        rows.append(row)
        print(f"{variant} x{n} K={k}: CE {row['ce']:.4f} acc {row['acc']:.4f} "
              f"({row['seconds']:.0f} s)", file=sys.stderr, flush=True)
        (args.out / "rows.json").write_text(json.dumps(rows, indent=1))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--targets", type=Path, required=True)
    ap.add_argument("--dbn", type=Path, required=True, help="asrdist-pretrain-rbm's dbn.pt")
    ap.add_argument("--out", type=Path, default=Path("/tmp/suchen_study"))
    ap.add_argument("--learners", type=int, nargs="*", default=[2, 4, 8])
    ap.add_argument("--periods", type=int, nargs="+", default=[5],
                    help="averaging periods (steps) for every N")
    ap.add_argument("--sweep", type=int, nargs="*", default=[20],
                    help="extra periods run at the largest N only")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--fraction", type=float, default=0.5, help="epochs of data per run")
    ap.add_argument("--samples", type=int, default=8, help="held-out samples per run")
    ap.add_argument("--hidden-layers", type=int, default=3)
    ap.add_argument("--hidden-units", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--heldout-utts", type=int, default=60)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--lr-final", type=float, default=0.02)
    publish_option(ap, __file__)
    ap.add_argument("--report-only", action="store_true",
                    help="re-make the table and plot from OUT/rows.json")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        rows = json.loads((args.out / "rows.json").read_text())
    else:
        rows = run_all(args)
    plot(rows, generated(__file__, ".png"))
    paths = {args.data: "DATA", args.targets: "TARGETS", args.dbn: "DBN", args.out: "OUT"}
    named = [name for path, name in paths.items() if shown(path, name) == name]
    meaning = {"DATA": "the features", "TARGETS": "the ingested targets",
               "DBN": "asrdist-pretrain-rbm's dbn.pt", "OUT": "the runs' scratch directory"}
    publish(scrub([
        HEADING, "",
        f"{args.fraction} epoch of the mini corpus per run (`{args.data}`), sigmoid DNN "
        f"{args.hidden_layers} x {args.hidden_units}, splice 5, batch {args.batch_size} "
        f"chunks x 8 frames per learner, `--lr-schedule kaldi` (N x {args.lr} decaying to "
        f"N x {args.lr_final}), momentum 0, seed 0; RBM stack `{args.dbn}`. Target CE of a "
        "variant = the held-out CE its 1-learner run had after half of its steps; speed-up "
        "= that run's steps to the target / the N-learner run's. Plot: "
        "`bench/results/suchen_study.png` (held-out CE against data seen)."
        + ("".join(f" {name}: {meaning[name]}." for name in named)), "",
        f"Command: `.venv/bin/python -m bench.suchen_study --data {args.data} --targets "
        f"{args.targets} --dbn {args.dbn} --learners {' '.join(map(str, args.learners))} "
        f"--periods {' '.join(map(str, args.periods))} --sweep "
        f"{' '.join(map(str, args.sweep))} --fraction {args.fraction} --publish`; one run:", "",
        f"    {rows[-1]['cmd']}", "",
        *table(rows),
    ], paths), args.publish)


if __name__ == "__main__":
    main()
