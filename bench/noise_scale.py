"""The gradient noise scale B_simple (McCandlish et al. 2018) along a short training of the
mini recipe's BLSTM: the critical batch, in chunks, as asrdist-train measures it.

The demo's model and options (``recipes/mini/conf/train_blstm.yaml``: BLSTM 2x128, 10 + 21 +
10-frame chunks, SpecAugment, lr 1.6 at 256 chunks, linear scaling) on one learner with the
demo's global batch (2 learners x 64 = 128 chunks, so the same 0.8 per step), measuring
B_simple every ``--every`` steps from the halves of each batch (B_small 64, B_big 128).
Writes ``bench/results/noise_scale.png`` (B_simple and the held-out cross-entropy against
epochs) and, with ``--publish``, its section, ``bench/results/noise_scale.md``.

    .venv/bin/python -m bench.noise_scale --data DATA --targets TARGETS --work DIR
        [--epochs 2] [--every 10] [--publish]
"""

from __future__ import annotations

import argparse
import bisect
from pathlib import Path
from typing import Any

import torch

from asrdist.parallel.strategy import Single
from asrdist.train.config import make_config
from asrdist.train.metrics import read_metrics
from asrdist.train.trainer import train
from bench.results import REPO, generated, publish, publish_option, shown
from bench.studies.figure import panels, write_png

CONFIG = REPO / "recipes/mini/conf/train_blstm.yaml"
PNG = generated(__file__, ".png")
POINTS = (0.0, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # epochs shown in the table


def run(args: argparse.Namespace) -> Path:
    """Train (or find trained: asrdist-train skips a done run) and return the run dir."""
    out = Path(args.work) / f"blstm_b{args.batch_size}_e{args.epochs}_s{args.seed}"
    config = make_config(CONFIG, {
        "data": args.data, "targets": args.targets, "out": str(out),
        "batch_size": args.batch_size, "epochs": args.epochs, "noise_scale_every": args.every,
        "checkpoint_every": 0, "heldout_every": args.heldout_every, "seed": args.seed,
    })
    train(config, Single())
    return out


def nearest(records: list[dict[str, Any]], epoch: float) -> dict[str, Any] | None:
    """The record closest to ``epoch`` (records in progress order), None past the end."""
    if not records or epoch > records[-1]["progress"] + 1e-9:
        return None
    xs = [r["progress"] for r in records]
    i = bisect.bisect_left(xs, epoch)
    around = records[max(0, i - 1): i + 1]
    return min(around, key=lambda r: abs(r["progress"] - epoch))


def figure(noise: list[dict], heldout: list[dict], path: Path) -> None:
    fig, (ax,) = panels(1, 8, 4.5)
    pts = [(r["progress"], r["b_simple"]) for r in noise if r["b_simple"] is not None]
    ax.plot(*zip(*pts, strict=True), color="C0", label="B_simple (EMA, chunks)")
    ax.axhline(128, color="C0", ls=":", lw=1, label="the demo's global batch (128)")
    ax.set_yscale("log")
    ax.set_xlabel("epochs")
    ax.set_ylabel("critical batch B_simple (chunks)")
    ax.grid(alpha=0.3)
    ce = ax.twinx()
    ce.plot([r["progress"] for r in heldout], [r["heldout_ce"] for r in heldout], "o-",
            color="C1", ms=3, label="held-out CE")
    ce.set_ylabel("held-out cross-entropy (nats/frame)")
    lines = ax.get_legend_handles_labels()
    more = ce.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8)
    ax.set_title("Gradient noise scale of the mini BLSTM (one learner, halves of 128 chunks)",
                 fontsize=9)
    write_png(fig, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the mini recipe's training features "
                    "(data/train_aug_mfcc)")
    ap.add_argument("--targets", required=True, help="its ingested targets (exp/mono_pdf)")
    ap.add_argument("--work", default="/tmp/asrdist-noise-scale", help="run dir parent")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--every", type=int, default=10, help="steps between measurements")
    ap.add_argument("--batch-size", type=int, default=128, help="chunks per step")
    ap.add_argument("--heldout-every", type=int, default=100, help="steps between held-out "
                    "evaluations")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--png", default=str(PNG))
    publish_option(ap, __file__)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    out = run(args)
    records = read_metrics(out / "metrics.jsonl")
    noise = [r for r in records if r["kind"] == "noise"]
    heldout = [r for r in records if r["kind"] == "heldout"]
    start = next(r for r in records if r["kind"] == "start")
    figure(noise, heldout, Path(args.png))
    wall_s = records[-1]["wall_s"]  # the run's own clock, whichever session trained it
    measured = [r["measure_s"] for r in noise if "measure_s" in r]
    cost = (f"; the measurements {sum(measured) / wall_s:.0%} of it" if measured else
            ", each measurement one more forward and backward of the batch")
    lines = [
        "## Gradient noise scale (critical batch) along training", "",
        f"Command: `.venv/bin/python -m bench.noise_scale --data DATA --targets TARGETS "
        f"--epochs {args.epochs} --every {args.every} --batch-size {args.batch_size} --work DIR "
        f"--publish`", "",
        "B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018, arXiv:1812.06162), the batch "
        "above which larger batches mostly stop buying fewer steps, measured by "
        "`asrdist-train --noise-scale-every` (asrdist.train.noise_scale): the unbiased "
        "two-batch-size estimates of |G|^2 and tr(Sigma) of the paper's appendix A.1, each "
        "a moving average (decay 0.9 per measurement) before the ratio. Here one learner "
        f"with the demo's global batch of {args.batch_size} chunks, from the two halves of "
        f"each measured batch (B_small {args.batch_size // 2}, B_big {args.batch_size}), every "
        f"{args.every} steps ({len(noise)} measurements); the demo's model and options "
        f"otherwise ({shown(CONFIG, 'the demo config')}: BLSTM 2x128, 21-frame chunks with "
        f"10 frames of context either side, SpecAugment, lr 0.8 per step), "
        f"{start['train_utts']} training utterances "
        f"({sum(start['steps_per_epoch'][:args.epochs])} steps), seed {args.seed}. "
        f"Plot: `{shown(args.png, 'the --png file')}`. Training wall time "
        f"{wall_s / 60:.0f} min{cost}, on the shared 2-core CPU machine, {args.threads} "
        "torch thread(s), contended by other sessions' jobs.", "",
        f"| epochs | step | B_simple (chunks) | \\|G\\|^2 (EMA) | tr(Sigma) (EMA) | "
        f"\\|G_{args.batch_size // 2}\\|^2 | \\|G_{args.batch_size}\\|^2 | held-out CE |",
        "|---|---|---|---|---|---|---|---|",
    ]
    shown_rows = [r for r in (nearest(noise, e) for e in POINTS) if r is not None]
    for r in shown_rows + ([noise[-1]] if noise[-1] not in shown_rows else []):  # the last too
        held = nearest(heldout, r["progress"])
        ce = f"{held['heldout_ce']:.4f}" if held and abs(
            held["progress"] - r["progress"]) < 0.07 else "-"
        b = f"{r['b_simple']:.0f}" if r["b_simple"] is not None else "- (\\|G\\|^2 <= 0)"
        lines.append(f"| {r['progress']:.2f} | {r['step']} | {b} | {r['grad_sq']:.4g} | "
                     f"{r['trace_sigma']:.4g} | {r['grad_sq_small']:.4g} | "
                     f"{r['grad_sq_big']:.4g} | {ce} |")
    lines += [
        "",
        "Study 1's largest good batches (the largest global batch per strategy whose held-out "
        "CE stays within 2 % of the single learner's) are set beside the B_simple of study "
        "1's own model, measured the same way on its SSGD run, in its generated section, "
        "`bench/results/large_batch.md`.",
    ]
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
