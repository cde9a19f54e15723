"""Elastic ADPSGD with real asrdist-train processes: one of 4 learners SIGKILLed at 30 % of
the run, against the same run without the kill and against 3 learners from the start.

Every run is adpsgd-random ``--elastic`` (gloo on CPU, torchrun's environment set by hand:
the learners are started here, so no launcher ends the survivors) on the test corpus
(:func:`asrdist.testing.make_corpus`), each learner to ``--max-steps``. Per run: the steps each
learner did, the wall time from the start to the last learner's exit, the step the survivors
logged for the lost learner, and the held-out cross-entropy of the exported average (final.pt,
learner 0's ``final`` record).

    .venv/bin/python -m bench.elastic --publish
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from asrdist.parallel.launch.rendezvous import free_port
from asrdist.testing import make_corpus
from asrdist.train.metrics import metrics_path, read_metrics
from bench.results import publish, publish_option

STEPS = 300
ARGS = ["--algo=adpsgd-random", "--elastic", "--layers=2", "--units=256", "--chunk-len=20",
        "--batch-size=8", "--shuffle-buffer=16", "--heldout-utts=8", "--lr-ref-batch=8",
        "--log-every=5", "--epochs=1000", f"--max-steps={STEPS}", "--checkpoint-every=100",
        "--exchange-timeout=10", "--distance-every=0"]
KILLED = 2
PDFS = 40  # the default 5 are learnt to a held-out CE near 0, where runs cannot differ


@dataclass
class Outcome:
    name: str
    steps: list[int]  # per learner, as it last logged them
    wall_s: float
    left: str  # the survivors' line for the lost learner, or "-"
    heldout_ce: float | None


def _steps(out: Path, rank: int) -> int:
    path = metrics_path(out, rank)
    if not path.is_file():
        return 0
    try:
        records = [r for r in read_metrics(path) if r["kind"] == "train"]
    except ValueError:  # a record half-written as we read
        return 0
    return records[-1]["step"] if records else 0


def run(data: Path, targets: Path, out: Path, learners: int, kill_at: float | None) -> Outcome:
    """Train ``learners`` learners into ``out``; SIGKILL learner 2 once learner 0 has done
    ``kill_at`` of the steps."""
    port = free_port()
    out.mkdir(parents=True)
    procs = []
    t0 = time.monotonic()
    for rank in range(learners):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(learners),
               "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "OMP_NUM_THREADS": "1"}
        cmd = [sys.executable, "-c", "from asrdist.cli.train import main; main()", "--data",
               str(data), "--targets", str(targets), "--out", str(out), *ARGS]
        with open(out / f"err{rank}.txt", "w") as err:
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err))
    killed = False
    while any(p.poll() is None for p in procs):
        if time.monotonic() - t0 > 900:
            for p in procs:
                p.kill()
            raise RuntimeError(f"{out}: still running after 900 s")
        if kill_at is not None and not killed and _steps(out, 0) >= kill_at * STEPS:
            procs[KILLED].send_signal(signal.SIGKILL)
            killed = True
        time.sleep(0.05)
    wall = time.monotonic() - t0
    errs = "".join((out / f"err{r}.txt").read_text(errors="replace") for r in range(learners))
    bad = [r for r, p in enumerate(procs) if p.returncode != 0 and not (killed and r == KILLED)]
    if bad or not (out / "final.pt").is_file():
        raise RuntimeError(f"{out}: learners {bad} failed: {errs[-2000:]}")
    final = [r for r in read_metrics(metrics_path(out, 0))
             if r["kind"] == "heldout" and r.get("final")]
    left = re.search(r"learner \d+ left at step \d+", errs)
    name = f"{learners} learners" + (f", learner {KILLED} SIGKILLed at {kill_at:.0%}"
                                     if kill_at is not None else "")
    return Outcome(name, [_steps(out, r) for r in range(learners)],
                   wall, left.group(0) if left else "-",
                   final[-1]["heldout_ce"] if final else None)


def table(outcomes: list[Outcome], seconds: float) -> list[str]:
    lines = [
        "## Elastic ADPSGD: a learner lost at 30 % of the run (4 learners)",
        "",
        "Command: `.venv/bin/python -m bench.elastic --publish` "
        f"(took {seconds:.0f} s). adpsgd-random `--elastic`, each learner to step {STEPS} "
        "(`" + " ".join(a for a in ARGS if not a.startswith("--algo")) + "`) on "
        f"`asrdist.testing.make_corpus(num_utts=64, num_pdfs={PDFS})`, learners started by "
        "the bench (torchrun's variables, gloo, 127.0.0.1), the runs one after the other on "
        "the 2 shared cores. "
        "Steps: each learner's last logged step (every 5), the killed one's before it died. "
        "Held-out CE: the exported average "
        "(final.pt; learner 0's `final` record) on the 8 held-out utterances.",
        "",
        "| run | steps per learner | steps in all | wall (s) | survivors' log | "
        "held-out CE of final.pt |",
        "|---|---|---:|---:|---|---:|",
    ]
    for o in outcomes:
        steps = ", ".join(f"{s} (killed)" if "SIGKILL" in o.name and r == KILLED else str(s)
                          for r, s in enumerate(o.steps))
        ce = "-" if o.heldout_ce is None else f"{o.heldout_ce:.4f}"
        lines.append(f"| {o.name} | {steps} | {sum(o.steps)} | {o.wall_s:.1f} | {o.left} "
                     f"| {ce} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    publish_option(parser, __file__)
    args = parser.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="asrdist-elastic-") as tmp:
        root = Path(tmp)
        data, targets = make_corpus(root / "corpus", num_utts=64, num_pdfs=PDFS)
        outcomes = [run(data, targets, root / "full", 4, None),
                    run(data, targets, root / "killed", 4, 0.3),
                    run(data, targets, root / "three", 3, None)]
    publish(table(outcomes, time.monotonic() - t0), args.publish)


if __name__ == "__main__":
    main()
