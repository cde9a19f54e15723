"""What the simulator costs: host seconds per simulated step (every learner's step once) and
peak memory, at 1, 16 and 64 learners of the mini recipe's BLSTM (2x128, batch 128 chunks of
21 frames of 40-dim features, 181 pdfs: recipes/mini/conf/train_blstm.yaml), with the learners
computed one at a time and together (asrdist.simulate.batched, up to ``--together`` at once);
``--model conformer``: the mini recipe's Conformer instead (recipes/mini/conf/
train_conformer.yaml: 3 blocks of width 96, 4 heads, kernel 15), computed together by
torch.func's vmap of its own forward.

Each (strategy, N, mode) runs in its own process (so its peak memory is its own) on synthetic
features of the recipe's shapes: the cost does not depend on their values. Torch on one
thread, as asrdist-simulate runs by default; ``--device cuda`` puts the models on a GPU.

    .venv/bin/python -m bench.sim_cost [--learners 1 16 64] [--steps 3] [--warmup 1] [--together 8]
        [--device cpu] [--model blstm|conformer] [--publish [FILE]]
    # the Conformer's section:
    .venv/bin/python -m bench.sim_cost --learners 1 16 --steps 4 --together 16 --device cpu \
        --model conformer --algos ssgd adpsgd-random --publish bench/results/sim_cost_conformer.md
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
from asrdist.simulate.batched import FrameLoss
from asrdist.simulate.run import simulate
from bench.results import publish, publish_option

DIM, PDFS, CHUNK = 40, 181, 21
MODES = {"one": "one at a time", "together": "together"}
MODELS = {  # the mini recipe's networks (recipes/mini/conf)
    "blstm": lambda layers, units: ModelConfig(layers=layers, units=units),
    "conformer": lambda layers, units: ModelConfig(type="conformer", conformer_blocks=3,
                                                   attention_dim=96, attention_heads=4,
                                                   conv_kernel=15),
}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one(algo: str, n: int, steps: int, batch: int, layers: int, units: int, together: int,
        device: str, model: str = "blstm", warmup: int = 1) -> dict:
    """Simulate ``n`` learners for ``steps`` steps, ``together`` at once (0: one at a time);
    host time per simulated step from the first learner's step ``warmup`` on (after one
    warm-up step of one learner; at least one step is timed), the first ``warmup`` steps' time
    per step apart, and peak memory. The first steps are a one-off: every learner's
    gradients, optimizer state and activations are allocated and first touched there, which
    one learner's warm-up cannot do for N; a study runs thousands of steps after them."""
    warmup = max(0, min(warmup, steps - 1))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = MODELS[model](layers, units)
    init = build_model(config, DIM, PDFS).to(device)
    data = (torch.randn(8, batch, CHUNK, DIM, device=device),
            torch.randint(0, PDFS, (8, batch, CHUNK), device=device))
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    base_host, base_gpu = _peak_mb(), torch.cuda.memory_allocated() if cuda else 0
    marks: dict[str, float] = {}

    def make_model(i: int) -> torch.nn.Module:
        m = build_model(config, DIM, PDFS).to(device)
        m.load_state_dict(init.state_dict())
        return m

    def batch_of(i: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        marks.setdefault("first", time.perf_counter())
        if k >= warmup:
            marks.setdefault("timed", time.perf_counter())
        j = (i + k) % 8
        return data[0][j], data[1][j]

    def sgd(m: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

    # one learner's step first: torch's first call of each kernel is not the cost of a step
    simulate(algo, 1, 1, make_model, sgd, FrameLoss(lambda i, k: (data[0][0], data[1][0])),
             together=together)
    marks.clear()
    res = simulate(algo, n, steps, make_model, sgd, FrameLoss(batch_of), together=together)
    if cuda:
        torch.cuda.synchronize()
    host = time.perf_counter() - marks["timed"]
    first = (marks["timed"] - marks["first"]) / warmup if warmup else host / steps
    return {"algo": algo, "n": n, "mode": "together" if together else "one",
            "s_per_step": host / (steps - warmup), "first_s_per_step": first,
            "peak_mb": _peak_mb() - base_host,
            "gpu_peak_mb": (torch.cuda.max_memory_allocated() - base_gpu) / 2**20 if cuda
            else 0.0, "params": sum(p.numel() for p in init.parameters()),
            "exchanges": res.summary.get("exchanges", 0)}


def run_all(algos: list[str], learners: list[int], steps: int, batch: int, layers: int,
            units: int, together: int, device: str, model: str = "blstm",
            warmup: int = 1) -> list[dict]:
    """Every (strategy, N, mode), each in its own process, one mode beside the other."""
    rows = []
    for algo in algos:
        for n in learners:
            for mode in MODES:
                cmd = [sys.executable, "-m", "bench.sim_cost", "--one", "--algos", algo,
                       "--learners", str(n), "--steps", str(steps), "--batch", str(batch),
                       "--layers", str(layers), "--units", str(units), "--device", device,
                       "--model", model, "--warmup", str(warmup),
                       "--together", str(together if mode == "together" else 0)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                rows.append(json.loads(out.strip().splitlines()[-1]))
                print(rows[-1], file=sys.stderr)
    return rows


def table(rows: list[dict]) -> list[str]:
    """Per row: seconds per simulated step, as a multiple of 1 learner's (one at a time: the
    simulator as it was) and of the same N one at a time, and memory."""
    base = {r["algo"]: r["s_per_step"] for r in rows if r["n"] == 1 and r["mode"] == "one"}
    alone = {(r["algo"], r["n"]): r["s_per_step"] for r in rows if r["mode"] == "one"}
    lines = ["| strategy | learners | computed | host s / simulated step | x 1 learner | "
             "x one at a time | first steps: s / step | peak MB (host) | peak MB (GPU) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        one_n = base.get(r["algo"])
        ratio = f"{r['s_per_step'] / one_n:.1f}" if one_n else "-"
        versus = alone.get((r["algo"], r["n"]))
        speedup = f"{r['s_per_step'] / versus:.2f}" if versus else "-"
        lines.append(f"| {r['algo']} | {r['n']} | {MODES[r['mode']]} | {r['s_per_step']:.2f} | "
                     f"{ratio} | {speedup} | {r['first_s_per_step']:.2f} | {r['peak_mb']:.0f} | "
                     f"{r['gpu_peak_mb']:.0f} |")
    return lines


def _described(args: argparse.Namespace) -> str:
    if args.model == "conformer":
        return "Conformer (3 blocks x 96, 4 heads, kernel 15; learners together by vmap)"
    return f"BLSTM {args.layers}x{args.units}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--algos", nargs="+", default=["ssgd", "adpsgd-random"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1,
                    help="first steps not in the timed figure (reported apart)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--units", type=int, default=128)
    ap.add_argument("--together", type=int, default=8,
                    help="learners computed at once in the 'together' rows")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", choices=sorted(MODELS), default="blstm")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    publish_option(ap, __file__)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.algos[0], args.learners[0], args.steps, args.batch,
                             args.layers, args.units, args.together, args.device,
                             args.model, args.warmup)))
        return
    rows = run_all(args.algos, args.learners, args.steps, args.batch, args.layers, args.units,
                   args.together, args.device, args.model, args.warmup)
    params = rows[0]["params"]
    lines = [
        "## Simulator cost per learner (asrdist-simulate)",
        "",
        "Command: `.venv/bin/python -m bench.sim_cost --learners "
        f"{' '.join(map(str, args.learners))} --steps {args.steps} --warmup {args.warmup} "
        f"--together {args.together} --device {args.device} --model {args.model} --publish`. "
        "The mini recipe's "
        f"{_described(args)} ({params / 1e6:.2f} M parameters), {args.batch} chunks of "
        f"{CHUNK} frames per learner-step, synthetic 40-dim features; torch on 1 thread, on "
        f"{args.device}; each row its own process, the two modes of one N run one after the "
        "other (on the shared 2-core CPU machine, absolute seconds are noisy: compare the "
        "ratios). A simulated step is every learner's step once; the host time per step is "
        f"of steps {args.warmup + 1}..{args.steps}, the first {args.warmup} (every learner's "
        "buffers allocated and first touched) apart. Memory: the peak resident MB "
        "(and on a GPU the peak allocated MB) the process grew by once its data was made "
        "(models, gradients, momentum, ADPSGD's snapshots and books, the step's activations: "
        "those of up to --together learners at once in the 'together' rows).",
        "",
        *table(rows),
    ]
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
