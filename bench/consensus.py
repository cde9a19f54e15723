"""Consensus speed of the ADPSGD rings at learning rate 0: fixed vs random, 4 and 8 learners.

Learners start from different weights and only average (lr = 0, real processes, gloo). After
each round (one step of every learner: one exchange per active learner) we take the relative
distance to the mean, sqrt(mean_i ||w_i - mean||^2) at round k over the same at round 0, and
report the first round at which it falls below each threshold. The mean itself must not move.

    .venv/bin/python -m bench.consensus [--rounds 80]
        [--publish]   # writes its file in bench/results
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from asrdist.parallel.registry import make_strategy
from asrdist.parallel.rules import rings
from asrdist.parallel.rules.weights import flat_weights
from asrdist.parallel.strategy import train_step
from asrdist.testing.learners import launch
from bench.results import publish, publish_option

THRESHOLDS = (1e-1, 1e-2, 1e-3)


def _learner(rank: int, n: int, algo: str, rounds: int, pace_s: float) -> np.ndarray:
    torch.manual_seed(rank)
    model = torch.nn.Linear(32, 32)
    strategy = make_strategy(algo, distance_every=0)
    wrapped = strategy.wrap_model(model)
    frozen = torch.optim.SGD(wrapped.parameters(), lr=0.0)  # lr = 0: only averaging moves w

    def no_loss(m: torch.nn.Module) -> torch.Tensor:
        time.sleep(pace_s)  # equal-speed learners, so a round is one step of each
        return sum(p.sum() for p in m.parameters()) * 0.0

    history = [flat_weights(model)]
    for step in range(rounds):
        train_step(strategy, wrapped, frozen, step, no_loss)
        history.append(flat_weights(model))
    strategy.finalize(wrapped)
    history.append(flat_weights(model))  # the final average
    strategy.close()
    return torch.stack(history).numpy()  # numpy: torch tensors would travel as shared memory


def rounds_to(algo: str, n: int, rounds: int, pace_s: float) -> tuple[list[int | None], float]:
    """First round under each threshold, and how far the exported mean moved (max abs)."""
    hist = torch.from_numpy(np.stack(launch(_learner, n, algo, rounds, pace_s)))
    mean0 = hist[:, 0].mean(0)
    dist = ((hist[:, :-1] - mean0) ** 2).sum(-1).mean(0).sqrt()
    rel = dist / dist[0]
    firsts = [next((k for k, v in enumerate(rel.tolist()) if v < t), None) for t in THRESHOLDS]
    return firsts, float((hist[0, -1] - mean0).abs().max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=80)
    ap.add_argument("--pace-ms", type=float, default=10.0)
    publish_option(ap, __file__)
    args = ap.parse_args()
    cmd = f".venv/bin/python -m bench.consensus --rounds {args.rounds} --pace-ms {args.pace_ms:g}"
    lines = ["## ADPSGD consensus at lr 0 (fixed vs random ring)", "",
             "Real learner processes that only average; rounds until the relative distance to "
             "the learners' mean falls below each threshold ('-': not within "
             f"{args.rounds} rounds); 'mean moved' = max |exported average - initial mean|.", "",
             f"Command: `{cmd}`", "",
             "| learners | ring | " + " | ".join(f"< {t:g}" for t in THRESHOLDS)
             + " | mean moved | spectral gap of E[W^T W] |",
             "|---|---|" + "---|" * len(THRESHOLDS) + "---|---|"]
    for n in (4, 8):
        for algo in ("adpsgd-fixed", "adpsgd-random"):
            firsts, moved = rounds_to(algo, n, args.rounds, args.pace_ms / 1000)
            cells = " | ".join("-" if f is None else str(f) for f in firsts)
            kind = algo.split("-")[1]
            gap = rings.expected_mixing_gap(kind, n, 400)
            lines.append(f"| {n} | {kind} | {cells} | {moved:.1e} | {gap:.3f} |")
            print(lines[-1], flush=True)
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
