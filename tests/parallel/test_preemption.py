"""Stop signals and resume with real learners (asrdist-train's CLI, forked, torchrun's variables).

SIGTERM to every learner, or to one, mid-run: each finishes its step, checkpoints, exits 75;
``--resume`` continues from exactly those steps (no step trained twice, none from scratch).
A learner that fails on its own ends the job with its error first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from asrdist.parallel.processes.preempt import STOPPED_STATUS
from asrdist.train.checkpoint import list_checkpoints
from asrdist.train.metrics import metrics_path, read_metrics
from tests.parallel.cli_learners import (
    TINY_MODEL,
    join_learners,
    start_learners,
    train_records,
    when_training,
)

TINY = [*TINY_MODEL, "--log-every=1", "--epochs=50",
        "--max-steps=60", "--checkpoint-every=25", "--exchange-timeout=20",
        "--distance-every=0", "--keep-checkpoints=1"]



def _start(corpus, out: Path, algo: str, *extra: str) -> list:
    return start_learners(corpus, out, algo, *TINY, *extra)


@pytest.mark.parametrize(("algo", "signalled"), [
    ("adpsgd-random", (0, 1)),  # drifting asynchronous learners, each stops at its own step
    ("ssgd", (1,)),             # one learner signalled: both stop at one agreed step
    ("ma", (0, 1)),
])
def test_stop_signal_checkpoints_every_learner_and_resume_continues(corpus, tmp_path, algo,
                                                                    signalled):
    out = tmp_path / "run"
    extra = ["--avg-period=4"] if algo == "ma" else []
    procs = _start(corpus, out, algo, *extra)
    when_training(out, procs, 5)
    for r in signalled:
        os.kill(procs[r].pid, signal.SIGTERM)
    codes = join_learners(procs, out)
    errs = [(out / f"err{r}.txt").read_text() for r in range(2)]
    assert codes == [STOPPED_STATUS] * 2, errs
    stopped = []
    for rank in range(2):
        assert f"learner {rank} stopped by SIGTERM" in errs[rank], errs[rank][-1500:]
        last = train_records(out, rank)[-1]["step"]
        assert max(list_checkpoints(out, rank)) == last < 60  # the stop step is checkpointed
        stopped.append(last)
    assert not (out / "final.pt").exists()
    if algo != "adpsgd-random":
        assert stopped[0] == stopped[1]  # lockstep learners stop at the same step
    if algo == "ma":
        assert stopped[0] % 4 == 0  # at an averaging step: neither passed it alone
    codes = join_learners(_start(corpus, out, algo, *extra, "--resume"), out)
    assert codes == [0, 0], [(out / f"err{r}.txt").read_text()[-1500:] for r in range(2)]
    for rank in range(2):
        starts = [r for r in read_metrics(metrics_path(out, rank)) if r["kind"] == "start"]
        assert [(s["step"], s["resumed"]) for s in starts] == [(0, False),
                                                                (stopped[rank], True)]
        assert train_records(out, rank)[-1]["step"] == 60
    assert (out / "final.pt").is_file()
    # the figures printed with final.pt are the exported average's, not learner 0's own
    final = read_metrics(metrics_path(out, 0))[-1]
    assert final["kind"] == "heldout" and final["final"] and final["step"] == 60
    printed = (out / "err0.txt").read_text().splitlines()[-1]
    assert printed == f"{out / 'final.pt'}: heldout_ce {final['heldout_ce']:.4f}, " \
                      f"heldout_acc {final['heldout_acc']:.4f}", printed


def test_drifting_async_learners_without_a_common_checkpoint_resume_each_from_its_own(
        corpus, tmp_path):
    """Asynchronous learners keep one checkpoint each, at different steps (issue 9: --resume
    once retrained from step 0 here): each resumes from its own."""
    out = tmp_path / "run"
    procs = _start(corpus, out, "adpsgd-fixed", "--slow-learner=0:20")
    when_training(out, procs, 3)
    for p in procs:
        os.kill(p.pid, signal.SIGUSR1)
    assert join_learners(procs, out) == [STOPPED_STATUS] * 2
    steps = [max(list_checkpoints(out, r)) for r in range(2)]
    assert steps[0] != steps[1], "learners did not drift: the test proves nothing"
    assert join_learners(_start(corpus, out, "adpsgd-fixed", "--resume"), out) == [0, 0]
    for rank in range(2):
        starts = [r for r in read_metrics(metrics_path(out, rank)) if r["kind"] == "start"]
        assert starts[-1]["step"] == steps[rank] and starts[-1]["resumed"]


def test_one_failing_learner_ends_the_job_fast_with_its_own_error_first(corpus, tmp_path):
    """Learner 1's checkpoint reads whole but is no checkpoint: it fails alone, says so first,
    and learner 0 ends within seconds naming it, not at the 20 s exchange timeout."""
    out = tmp_path / "run"
    procs = _start(corpus, out, "ssgd")
    when_training(out, procs, 3)
    for p in procs:
        os.kill(p.pid, signal.SIGTERM)
    assert join_learners(procs, out) == [STOPPED_STATUS] * 2
    ckpt = max(list_checkpoints(out, 1).items())[1]
    with zipfile.ZipFile(ckpt, "w") as z:
        z.writestr("notes.txt", "not a checkpoint")
    t0 = time.monotonic()
    codes = join_learners(_start(corpus, out, "ssgd", "--resume"), out, limit=30)
    seconds = time.monotonic() - t0
    errs = [(out / f"err{r}.txt").read_text() for r in range(2)]
    assert codes == [1, 1] and seconds < 12, (seconds, errs)
    assert errs[1].splitlines()[-1].startswith(f"Error: learner 1: {ckpt}: cannot load"), errs[1]
    assert f"[first report: learner 1: {ckpt}: cannot load" in errs[0], errs[0][-1500:]
    assert "Traceback" not in errs[0] + errs[1]


def test_ctrl_c_is_a_stop_signal_by_default(corpus, tmp_path):
    """SIGINT (a terminal's Ctrl-C goes to every learner) stops them all after a checkpoint."""
    out = tmp_path / "run"
    procs = _start(corpus, out, "ssgd")
    when_training(out, procs, 3)
    for p in procs:
        os.kill(p.pid, signal.SIGINT)
    assert join_learners(procs, out) == [STOPPED_STATUS] * 2
    for rank in range(2):
        err = (out / f"err{rank}.txt").read_text()
        assert f"learner {rank} stopped by SIGINT" in err, err[-1500:]
        assert max(list_checkpoints(out, rank)) == train_records(out, rank)[-1]["step"]


def test_a_second_ctrl_c_ends_the_learner_at_once_even_inside_a_collective(corpus, tmp_path):
    """Learner 1 frozen (SIGSTOP), learner 0 waits in the step's allreduce: a first Ctrl-C
    cannot finish the step; a second one, a moment later, ends it at once in one line."""
    out = tmp_path / "run"
    procs = _start(corpus, out, "ssgd")
    when_training(out, procs, 3)
    os.kill(procs[1].pid, signal.SIGSTOP)
    try:
        time.sleep(0.5)  # learner 0 is now blocked in the allreduce of its next step
        os.kill(procs[0].pid, signal.SIGINT)
        time.sleep(1.5)
        assert procs[0].exitcode is None
        t0 = time.monotonic()
        os.kill(procs[0].pid, signal.SIGINT)
        procs[0].join(5)
        assert procs[0].exitcode == 130 and time.monotonic() - t0 < 2
    finally:
        os.kill(procs[1].pid, signal.SIGCONT)
    join_learners(procs, out, limit=30)  # learner 1 ends too: the store went with learner 0
    lines = (out / "err0.txt").read_text().strip().splitlines()
    assert lines[-1] == "asrdist: learner 0: second SIGINT: ending now, without a checkpoint " \
                        "(the last one written is kept)", lines[-5:]
    assert procs[1].exitcode != 0


def _catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (its /proc status SigCgt mask)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(line.split()[1] for line in status.splitlines()
                      if line.startswith("SigCgt:")), 16)
    return bool(caught >> (sig - 1) & 1)


@pytest.mark.parametrize(("sig", "after_s"), [(signal.SIGTERM, 0.0), (signal.SIGINT, 1.0)])
def test_a_stop_signal_in_the_first_moments_is_a_stop_too(corpus, tmp_path, sig, after_s):
    """Before the command has installed its handlers (importing torch takes seconds), a stop
    signal is noted all the same: the learner checkpoints its first step and exits 75. The
    signal is sent once the process catches stop signals (at once, and a second later)."""
    data, targets = corpus
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "asrdist.cli.train", "--data", str(data),
                             "--targets", str(targets), "--out", str(out), *TINY],
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 60  # until early_signals is in: Python's start-up, not ours
    while not _catches(proc.pid, signal.SIGUSR1) and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(after_s)
    proc.send_signal(sig)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == STOPPED_STATUS, err[-2000:]
    assert f"learner 0 stopped by {sig.name} at step 1, checkpointed" in err, err[-2000:]
    assert sorted(list_checkpoints(out, 0)) == [1]
