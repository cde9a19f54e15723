"""Throughput of NG-SGD against plain SGD on the same model and the very same batches.

    python -m bench.ngsgd_throughput [--steps 40] [--repeats 5] [--device cpu] [--out RESULTS.md]

Models: Su & Chen's sigmoid DNN of recipes/mini/conf/train_dnn_suchen.yaml (every layer
affine, so all of it preconditioned) and the mini recipe's BLSTM (only its output layer is
preconditioned; the LSTM weights stay plain SGD). Synthetic 40-dim batches, preloaded; a step
is forward, cross-entropy, backward (where NG-SGD preconditions), SGD step and loss.item().
The two optimizers alternate run by run; each run is preceded by warm-up steps so that
NG-SGD is past its first 10 every-step updates and in its every-4-steps regime; the best
frames/s of the repeats and the median of the paired ratios are reported (shared machine).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.nn import functional as F

from asrdist.models.build import ModelConfig, build_model
from asrdist.optim.build import build_optimizer
from asrdist.optim.ngsgd import NGOptions
from bench.results import publish

DIM, PDFS = 40, 120
MODELS = {
    "sigmoid DNN 4x512, splice 5 (train_dnn_suchen.yaml)": (
        ModelConfig(type="dnn", splice=5, hidden_layers=4, hidden_units=512,
                    activation="sigmoid"), 8, 64),
    "BLSTM 2x128 (train_blstm.yaml)": (ModelConfig(type="blstm", layers=2, units=128), 21, 128),
}
WARMUP = 14


def _batches(config: ModelConfig, chunk: int, batch: int, steps: int, device: torch.device):
    context = 2 * config.splice if config.type == "dnn" else 0
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(batch, chunk + context, DIM, generator=g).to(device),
             torch.randint(0, PDFS, (batch, chunk), generator=g).to(device))
            for _ in range(steps)]


def _run(config: ModelConfig, optimizer: str, batches: list, device: torch.device) -> float:
    """frames/s over ``batches`` after WARMUP steps, a fresh model and optimizer."""
    torch.manual_seed(0)
    model = build_model(config, DIM, PDFS).to(device)
    opt = build_optimizer(optimizer, model, 0.01, 0.0, False, 0.0, NGOptions())

    def step(x: torch.Tensor, y: torch.Tensor) -> None:
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()

    for x, y in batches[:WARMUP]:
        step(x, y)
    t0 = time.perf_counter()
    for x, y in batches[WARMUP:]:
        step(x, y)
    seconds = time.perf_counter() - t0
    return sum(y.numel() for _, y in batches[WARMUP:]) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="timed steps per run")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", help="markdown file whose section to replace")
    args = parser.parse_args()
    device = torch.device(args.device)
    rows = []
    for name, (config, chunk, batch) in MODELS.items():
        batches = _batches(config, chunk, batch, WARMUP + args.steps, device)
        sgd, ng = [], []
        for _ in range(args.repeats):
            sgd.append(_run(config, "sgd", batches, device))
            ng.append(_run(config, "ngsgd", batches, device))
        ratios = [n / s for n, s in zip(ng, sgd, strict=True)]
        rows.append(f"| {name} | {chunk * batch} | {max(sgd):,.0f} | {max(ng):,.0f} | "
                    f"{max(ng) / max(sgd):.2f} | {statistics.median(ratios):.2f} |")
    threads = torch.get_num_threads()
    publish([
        "## NG-SGD throughput against plain SGD",
        "",
        f"Same model, same preloaded batches, fresh weights per run; {args.steps} timed steps "
        f"after {WARMUP} warm-up steps, {args.repeats} alternating repeats; device "
        f"{args.device}, torch {threads} thread(s). Ratio = NG-SGD frames/s / SGD frames/s "
        "(1 - ratio is the overhead).",
        "",
        f"Command: `.venv/bin/python -m bench.ngsgd_throughput --steps {args.steps} "
        f"--repeats {args.repeats} --device {args.device}`",
        "",
        "| model | frames/step | SGD frames/s (best) | NG-SGD frames/s (best) | ratio of bests "
        "| median paired ratio |",
        "|---|---|---|---|---|---|",
        *rows,
    ], args.out)


if __name__ == "__main__":
    main()
