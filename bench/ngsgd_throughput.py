"""Throughput of NG-SGD against plain SGD on the same model and the very same batches.

    python -m bench.ngsgd_throughput [--steps 60] [--device cpu] [--threads N] [--publish]

Models: Su & Chen's sigmoid DNN of recipes/mini/conf/train_dnn_suchen.yaml (every layer
affine, so all of it preconditioned) and the mini recipe's BLSTM (only its output layer is
preconditioned; the LSTM weights stay plain SGD). Synthetic 40-dim batches, preloaded; a step
is forward, cross-entropy, backward (where NG-SGD preconditions), SGD step and loss.item().
Both optimizers train their own copy of the model in one run, step for step alternately (an
SGD step, then an NG-SGD step on the same batch), so a machine shared with other jobs slows
both alike; warm-up steps first take NG-SGD past its first 10 every-step updates into its
every-4-steps regime. Reported: frames/s of each over the timed steps, their ratio, and the
median ratio over groups of 4 consecutive step pairs (one Fisher update each).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch.nn import functional as F

from asrdist.models.build import ModelConfig, build_model
from asrdist.optim.build import OptimizerOptions, build_optimizer
from asrdist.optim.ngsgd import NGOptions
from bench.results import publish, publish_option

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


def _stepper(config: ModelConfig, optimizer: str, device: torch.device):
    torch.manual_seed(0)
    model = build_model(config, DIM, PDFS).to(device)
    opt = build_optimizer(OptimizerOptions(optimizer=optimizer, momentum=0.0), model, 0.01,
                          NGOptions())

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        return time.perf_counter() - t0

    return step


def _interleaved(config: ModelConfig, batches: list, device: torch.device) -> tuple:
    """(SGD seconds, NG-SGD seconds) per timed step, stepping the two alternately."""
    sgd, ng = _stepper(config, "sgd", device), _stepper(config, "ngsgd", device)
    times: tuple[list[float], list[float]] = ([], [])
    for i, (x, y) in enumerate(batches):
        a, b = sgd(x, y), ng(x, y)
        if i >= WARMUP:
            times[0].append(a)
            times[1].append(b)
    return times


def measure(models: dict, steps: int, device: torch.device) -> list[str]:
    """One markdown table row per model: frames/s of SGD and NG-SGD and their ratios."""
    rows = []
    for name, (config, chunk, batch) in models.items():
        batches = _batches(config, chunk, batch, WARMUP + steps, device)
        sgd, ng = _interleaved(config, batches, device)
        frames = chunk * batch
        groups = [sum(sgd[i:i + 4]) / sum(ng[i:i + 4]) for i in range(0, len(sgd) - 3, 4)]
        rows.append(f"| {name} | {frames} | {frames * len(sgd) / sum(sgd):,.0f} | "
                    f"{frames * len(ng) / sum(ng):,.0f} | {sum(sgd) / sum(ng):.2f} | "
                    f"{statistics.median(groups):.2f} |")
    return rows


TABLE_HEAD = ["| model | frames/step | SGD frames/s | NG-SGD frames/s | ratio "
              "| median ratio of 4-step groups |", "|---|---|---|---|---|---|"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="timed steps")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int,
                        help="torch intra-op threads (default: torch's own choice); 1 keeps "
                             "a machine shared with other jobs from stalling both optimizers "
                             "at every parallel region")
    publish_option(parser, __file__)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = measure(MODELS, args.steps, torch.device(args.device))
    threads = torch.get_num_threads()
    publish([
        "## NG-SGD throughput against plain SGD",
        "",
        f"Same model and the same preloaded batches for both, in one run: SGD and NG-SGD "
        f"steps alternate; {args.steps} timed step pairs after {WARMUP} warm-up pairs; "
        f"device {args.device}, torch {threads} thread(s). Ratio = NG-SGD frames/s / SGD "
        "frames/s (1 - ratio is the overhead).",
        "",
        f"Command: `.venv/bin/python -m bench.ngsgd_throughput --steps {args.steps} "
        f"--device {args.device}{f' --threads {args.threads}' if args.threads else ''}`",
        "",
        *TABLE_HEAD,
        *rows,
    ], args.publish)


if __name__ == "__main__":
    main()
