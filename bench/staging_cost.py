"""What ADPSGD's weight staging (:mod:`asrdist.parallel.rules.staging`) costs per step, for the
paper-size BLSTM (43 M parameters).

Per step an active learner takes one snapshot and merges one delta. Timed: the snapshot's
cost to the compute thread (issue) and until the host copy is readable (ready), and the merge;
on a GPU also one training step of the model (forward and backward of ``--batch`` 21-frame
chunks) alone and with a snapshot before it and a merge after it, which is the stall the
exchange adds to the compute stream. On CPU every copy is synchronous, so issue = ready.

    .venv/bin/python -m bench.staging_cost [--device cuda] [--publish]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch

from asrdist.parallel.rules.staging import DeviceStaging
from bench.projection import CHUNK, paper_model
from bench.results import publish, publish_option


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], object], device: torch.device, reps: int) -> float:
    """Mean seconds of ``fn`` until the device is idle again, after one warm-up call."""
    fn()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / reps


def measure(model: torch.nn.Module, device: torch.device, batch: int,
            reps: int) -> list[tuple[str, float]]:
    """(what, seconds) of a snapshot, a merge and, on a GPU, a training step of ``batch``
    21-frame chunks alone and with the exchange's staging around it."""
    staging = DeviceStaging(model)
    delta = staging.zeros(staging.numel)
    issue: list[float] = []

    def snapshot() -> None:
        t0 = time.perf_counter()
        _, ready = staging.snapshot(model)
        issue.append(time.perf_counter() - t0)
        if ready is not None:
            ready()

    ready_s = timed(snapshot, device, reps)
    rows = [("snapshot: issue (compute thread)", sum(issue[1:]) / len(issue[1:])),
            ("snapshot: until readable by the exchange", ready_s),
            ("merge of one delta", timed(lambda: staging.add(model, delta), device, reps))]
    if device.type == "cuda":
        outputs = model.output.out_features
        x = torch.randn(batch, CHUNK, model.lstm.input_size, device=device)
        y = torch.randint(0, outputs, (batch * CHUNK,), device=device)

        def step() -> None:
            loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, outputs), y)
            loss.backward()

        def step_exchanging() -> None:
            staging.snapshot(model)
            step()
            staging.add(model, delta)

        rows += [(f"training step alone ({batch} chunks)", timed(step, device, reps)),
                 ("training step with snapshot + merge", timed(step_exchanging, device, reps))]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=64, help="chunks per training step (GPU)")
    ap.add_argument("--reps", type=int, default=5)
    publish_option(ap, __file__)
    args = ap.parse_args()
    device = torch.device(args.device)
    model = paper_model().to(device)
    rows = measure(model, device, args.batch, args.reps)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    numel = sum(p.numel() for p in model.parameters())
    lines = [
        "## Exchange staging cost per step (paper-size BLSTM)", "",
        f"Device: {name}; {numel / 1e6:.1f} M parameters; mean of {args.reps} after "
        "a warm-up. CPU: synchronous copies (the path ADPSGD had before); GPU: side stream, "
        "pinned host buffers, non-blocking copies, one device copy per merged delta. 1-minute "
        f"load average {os.getloadavg()[0]:.1f} (2 cores shared).", "",
        f"Command: `.venv/bin/python -m bench.staging_cost --device {args.device} "
        f"--batch {args.batch} --reps {args.reps}`", "",
        "| what | ms |", "|---|---|",
    ] + [f"| {what} | {s * 1e3:.1f} |" for what, s in rows]
    publish(lines, args.publish)


if __name__ == "__main__":
    main()
