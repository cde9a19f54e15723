"""Held-out cross-entropy per strategy on the mini corpus: every --algo with 2 and 4 learners.

Every run is the real CLI under mpiexec with one torch thread per learner::

    OMP_NUM_THREADS=1 mpiexec -n N asrdist-train --config recipes/mini/conf/train_blstm.yaml \\
        --data recipes/mini/data/train_fbank --targets recipes/mini/exp/mono_pdf \\
        --out OUT/<algo>_x<N> --algo A --epochs E --units U [--learners-per-node N/2 for hadpsgd]

All runs share every other setting (per-learner batch, learning-rate rule, seed). The exported
final.pt (the learners' average) is then scored on the utterances the trainer held out (same
seed, same split); learner 0's own figures at the end of the last epoch, before the final
average, come from its metrics.jsonl. With ``--publish`` the table is written to
bench/results/strategies_study.md.

    .venv/bin/python -m bench.strategies_study [--epochs 3] [--units 64] [--out OUT] [--publish]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from asrdist.data.dataset import load_corpus, split_heldout
from asrdist.models.final import load_final
from asrdist.parallel import registry
from asrdist.train.config import make_config
from asrdist.train.evaluate import evaluate
from asrdist.train.metrics import read_metrics
from bench.harness import run_training
from bench.results import publish, publish_option, scrub, shown

REPO = Path(__file__).resolve().parents[1]
MINI = Path("recipes/mini")  # paths relative to the repository root, where the runs start
ALGOS = [name for name, spec in registry.specs().items() if spec.multi_learner]
HEADING = "## Held-out cross-entropy per strategy (mini corpus)"


def train_command(args: argparse.Namespace, algo: str, learners: int, out: Path) -> list[str]:
    """The mpiexec command line of one run (hadpsgd: 2 super-learners of N/2 learners)."""
    cmd = ["mpiexec", "-n", str(learners), sys.executable, "-m", "asrdist.cli.train",
           "--config", str(args.config), "--data", str(args.data), "--targets", str(args.targets),
           "--out", str(out), "--algo", algo, "--epochs", str(args.epochs),
           "--units", str(args.units)]
    if algo == "hadpsgd":
        cmd += ["--learners-per-node", str(max(1, learners // 2))]
    return cmd


def score_final(run: Path) -> tuple[float, float]:
    """(cross-entropy, frame accuracy) of run/final.pt on the run's held-out utterances, scored
    as the trainer scores its own (asrdist.train.evaluate)."""
    cfg = make_config(run / "config.yaml")
    model, exported = load_final(run / "final.pt")
    corpus = load_corpus(cfg.data, cfg.targets, cfg.max_missing_targets)
    _, heldout = split_heldout(corpus, cfg.heldout_utts, cfg.seed)
    held = evaluate(model, cfg, corpus, heldout, exported.input_dim, torch.device("cpu"))
    return held.ce, held.acc


def run_one(args: argparse.Namespace, algo: str, learners: int) -> dict:
    out = args.out / f"{algo}_x{learners}"
    proc, seconds = run_training(train_command(args, algo, learners, out), out)
    if proc.returncode != 0:
        raise SystemExit(f"{algo} x{learners} failed:\n{proc.stderr[-3000:]}")
    records = read_metrics(out / "metrics.jsonl")
    own = [r for r in records if r["kind"] == "heldout"][-1]
    ce, acc = score_final(out)
    return {"algo": algo, "learners": learners, "steps": own["step"], "seconds": seconds,
            "ce": ce, "acc": acc, "own_ce": own["heldout_ce"], "own_acc": own["heldout_acc"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=MINI / "conf" / "train_blstm.yaml")
    ap.add_argument("--data", type=Path, default=MINI / "data" / "train_fbank")
    ap.add_argument("--targets", type=Path, default=MINI / "exp" / "mono_pdf")
    ap.add_argument("--out", type=Path, default=Path("/tmp/study"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--units", type=int, default=64)
    ap.add_argument("--learners", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--algos", nargs="+", default=ALGOS)
    publish_option(ap, __file__)
    args = ap.parse_args()
    os.chdir(REPO)
    rows = []
    for learners in args.learners:
        for algo in args.algos:
            row = run_one(args, algo, learners)
            print(f"{algo} x{learners}: CE {row['ce']:.4f} acc {row['acc']:.4f} "
                  f"({row['seconds']:.0f} s)", file=sys.stderr, flush=True)
            rows.append(row)
    example = " ".join(train_command(args, "ALGO", 0, args.out / "ALGO_xN")).replace(
        "-n 0", "-n N").replace(sys.executable, "python")
    lines = [
        HEADING, "",
        f"Every `--algo` with {' and '.join(map(str, args.learners))} learners (processes on "
        f"this 2-core CPU machine, gloo, `OMP_NUM_THREADS=1` each), {args.epochs} epoch(s) of "
        f"the mini corpus (`{args.data}`, targets `{args.targets}`), "
        f"`{args.config.name}` with `--units {args.units}`: per-learner batch, learning-rate "
        "rule (linear in batch x learners) and seed identical for every run. 'final.pt' = the "
        "exported model (average of all learners) on the held-out utterances; 'learner 0' = "
        "learner 0's own weights at the end of the last epoch, before the final average. "
        "hadpsgd: `--learners-per-node N/2` (2 super-learners)."
        + (" OUT: the runs' scratch directory." if shown(args.out, "OUT") == "OUT" else ""),
        "",
        f"Command: `.venv/bin/python -m bench.strategies_study --epochs {args.epochs} "
        f"--units {args.units} --out {args.out} --publish`, which runs for each strategy "
        "and N:", "",
        f"    OMP_NUM_THREADS=1 {example}", "",
        "| learners | strategy | steps per learner | wall s | held-out CE (final.pt) "
        "| frame acc (final.pt) | CE (learner 0) | acc (learner 0) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['learners']} | {r['algo']} | {r['steps']} | {r['seconds']:.0f} | "
                     f"{r['ce']:.4f} | {r['acc']:.4f} | {r['own_ce']:.4f} | {r['own_acc']:.4f} |")
    publish(scrub(lines, {args.out: "OUT", args.data: "DATA", args.targets: "TARGETS",
                          args.config: "CONFIG"}), args.publish)


if __name__ == "__main__":
    main()
