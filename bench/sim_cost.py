"""What the simulator costs per simulated learner: host seconds per learner-step and resident
memory, at 16, 64 and 128 learners of the mini recipe's BLSTM (2x128, batch 128 chunks of 21
frames of 40-dim features, 181 pdfs: recipes/mini/conf/train_blstm.yaml).

Each (strategy, N) runs in its own process (so its peak memory is its own) on synthetic
features of the recipe's shapes: the cost does not depend on their values. Torch on one
thread, as asrdist-simulate runs by default.

    .venv/bin/python -m bench.sim_cost [--learners 16 64 128] [--steps 2]
        [--out bench/RESULTS.md]   # replaces its section there
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch

from asrdist.models.build import ModelConfig, build_model
from asrdist.simulate.run import simulate
from asrdist.train.loss import frame_loss
from bench.results import publish

DIM, PDFS, CHUNK = 40, 181, 21


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def one(algo: str, n: int, steps: int, batch: int, layers: int, units: int) -> dict:
    """Simulate ``n`` learners for ``steps`` steps; host time and memory."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    init = build_model(ModelConfig(layers=layers, units=units), DIM, PDFS)
    data = torch.randn(8, batch, CHUNK, DIM), torch.randint(0, PDFS, (8, batch, CHUNK))
    base = _rss_mb()
    built = {}

    def make_model(i: int) -> torch.nn.Module:
        m = build_model(ModelConfig(layers=layers, units=units), DIM, PDFS)
        m.load_state_dict(init.state_dict())
        return m

    def loss_fn(i: int, k: int, model: torch.nn.Module) -> torch.Tensor:
        if "t0" not in built:
            built["t0"], built["rss_built"] = time.perf_counter(), _rss_mb()
        j = (i + k) % 8
        return frame_loss(model, data[0][j], data[1][j])

    res = simulate(algo, n, steps, make_model,
                   lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9), loss_fn)
    host = time.perf_counter() - built["t0"]
    params = sum(p.numel() for p in init.parameters())
    return {"algo": algo, "n": n, "s_per_learner_step": host / (n * steps),
            "rss_mb": _rss_mb() - base, "built_mb": built["rss_built"] - base,
            "params": params, "exchanges": res.summary.get("exchanges", 0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", type=int, nargs="+", default=[16, 64, 128])
    ap.add_argument("--algos", nargs="+", default=["ssgd", "adpsgd-random"])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--units", type=int, default=128)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.algos[0], args.learners[0], args.steps, args.batch,
                             args.layers, args.units)))
        return
    rows = []
    for algo in args.algos:
        for n in args.learners:
            cmd = [sys.executable, "-m", "bench.sim_cost", "--one", "--algos", algo,
                   "--learners", str(n), "--steps", str(args.steps), "--batch",
                   str(args.batch), "--layers", str(args.layers), "--units", str(args.units)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(rows[-1], file=sys.stderr)
    params = rows[0]["params"]
    lines = [
        "## Simulator cost per learner (asrdist-simulate)",
        "",
        "Command: `.venv/bin/python -m bench.sim_cost --learners "
        f"{' '.join(map(str, args.learners))} --steps {args.steps} --out bench/RESULTS.md`. "
        "The mini recipe's BLSTM "
        f"{args.layers}x{args.units} ({params / 1e6:.2f} M parameters), {args.batch} chunks of "
        f"{CHUNK} frames per learner-step, synthetic 40-dim features; CPU, torch on 1 thread, on "
        "the shared 2-core machine (other jobs running: absolute seconds are noisy, compare rows "
        "of one run). Memory: resident MB the process grew by (models, gradients, momentum, "
        "ADPSGD's flat snapshots and passive books, the step's activations).",
        "",
        "| strategy | learners | host s / learner-step | s / simulated step of all | "
        "memory MB | MB / learner |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['algo']} | {r['n']} | {r['s_per_learner_step']:.3f} | "
                     f"{r['s_per_learner_step'] * r['n']:.1f} | {r['rss_mb']:.0f} | "
                     f"{r['rss_mb'] / r['n']:.2f} |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
