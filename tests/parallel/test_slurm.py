"""local/slurm/train.sbatch on a real (private, one-node) Slurm cluster: preempted twice -- by
`scancel --signal=TERM` and by `scontrol requeue` -- the job continues by itself, with no work
lost, from nothing but the template's own settings (only its size is overridden to fit here)."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from asrdist.testing import make_corpus
from asrdist.train.metrics import metrics_path, read_metrics
from tests import slurm_cluster
from tests.parallel.cli_learners import TINY_MODEL
from tests.parallel.conftest import running_stores, stores_end

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "local" / "slurm" / "train.sbatch"
SIZE = ["--nodes=1", "--ntasks-per-node=2", "--cpus-per-task=1", "--gpus-per-node=0"]
TINY = [*TINY_MODEL, "--log-every=1", "--epochs=200",
        "--max-steps=300", "--checkpoint-every=100", "--exchange-timeout=30",
        "--distance-every=0"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from slurm_cluster.for_module(tmp_path_factory)


def _starts(out: Path) -> list[tuple[int, bool]]:
    path = metrics_path(out, 0)
    return [(r["step"], r["resumed"]) for r in read_metrics(path) if r["kind"] == "start"] \
        if path.is_file() else []


def _last_step(out: Path) -> int:
    path = metrics_path(out, 0)
    steps = [r["step"] for r in read_metrics(path) if r["kind"] == "train"] \
        if path.is_file() else []
    return steps[-1] if steps else 0


def _wait(what: str, ok, log: Path, limit: float = 120.0, job: str = "", cluster=None) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if ok():
            return
        if cluster is not None:  # skip Slurm's fixed 2-minute delay before a requeued job
            cluster.release_requeued(job)
        time.sleep(0.2)
    text = log.read_text() if log.is_file() else "(no log)"
    pytest.fail(f"{what} within {limit} s: " + text.replace("\r", "\n")[-3000:])


def test_preempted_and_requeued_sbatch_job_finishes_with_no_work_lost(cluster, tmp_path):
    data, targets = make_corpus(tmp_path / "corpus", num_utts=16)
    out, log = tmp_path / "run", tmp_path / "job.log"
    job = cluster.run("sbatch", "--parsable", *SIZE, f"--output={log}", f"--chdir={tmp_path}",
                      str(TEMPLATE), "--data", str(data), "--targets", str(targets),
                      "--out", str(out), "--algo", "ssgd", *TINY).strip()
    _wait("learners training", lambda: _last_step(out) >= 20, log)
    cluster.run("scancel", "--signal=TERM", job)  # as a preemption's or time limit's signal
    _wait("a restart after scancel --signal=TERM",
          lambda: len(_starts(out)) == 2 and _last_step(out) > _starts(out)[1][0] + 20, log,
          job=job, cluster=cluster)
    cluster.run("scontrol", "requeue", job)  # an administrator's requeue of the running job
    _wait("the job completed", lambda: cluster.job_state(job)[0] == "COMPLETED"
          and (out / "final.pt").is_file(), log, limit=150, job=job, cluster=cluster)
    text = log.read_text()  # the template requeued the first time; Slurm itself the second
    assert "learners stopped and checkpointed; requeueing" in text, text[-3000:]
    starts = _starts(out)
    assert [s[1] for s in starts] == [False, True, True] and starts[0][0] == 0
    train = [r["step"] for r in read_metrics(metrics_path(out, 0)) if r["kind"] == "train"]
    for stop in (starts[1][0], starts[2][0]):  # each resumed at the step it stopped at
        assert stop > 0 and train.count(stop) == 1 and train[train.index(stop) + 1] == stop + 1
    assert train[-1] == 300 and cluster.job_state(job)[1] == 2


def test_elastic_sbatch_job_goes_on_without_learner_0(cluster, tmp_path):
    """srun with --no-kill --kill-on-bad-exit=0 (the template's, under --elastic) lets learner
    1 go on when learner 0's task is SIGKILLed; it exports final.pt, and the store process
    learner 0 started is gone once the job ended."""
    data, targets = make_corpus(tmp_path / "corpus", num_utts=16)
    out, log = tmp_path / "run", tmp_path / "job.log"
    stores = running_stores()
    job = cluster.run("sbatch", "--parsable", *SIZE, f"--output={log}", f"--chdir={tmp_path}",
                      "--no-requeue", str(TEMPLATE), "--data", str(data), "--targets",
                      str(targets), "--out", str(out), "--algo", "adpsgd-random", "--elastic",
                      *TINY, "--exchange-timeout=5").strip()
    _wait("learners training", lambda: _last_step(out) >= 20, log)
    pid = re.search(r"learner 0/2 \(.*pid (\d+)\)", log.read_text())
    assert pid, log.read_text()[-3000:]
    os.kill(int(pid.group(1)), signal.SIGKILL)
    _wait("the job ended", lambda: cluster.job_state(job)[0] not in ("RUNNING", "PENDING",
                                                                      "COMPLETING"), log)
    text = log.read_text()
    assert "learner 0 left at step" in text and "going on with learners [1]" in text, text[-3000:]
    assert (out / "final.pt").is_file(), text[-3000:]
    steps = [r["step"] for r in read_metrics(metrics_path(out, 1)) if r["kind"] == "train"]
    assert steps[-1] == 300
    stores_end(stores)
