"""asrdist-train under real torchrun (``python -m torch.distributed.run``) and asrdist-torchrun
(``python -m asrdist.cli.torchrun``): a stop is status 75, a killed learner ends the job at
once named by rank, --max-restarts is refused."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asrdist.parallel.launch.rendezvous import free_port
from asrdist.parallel.processes.preempt import STOPPED_STATUS
from asrdist.train.checkpoint import list_checkpoints
from asrdist.train.metrics import metrics_path
from tests.parallel.cli_learners import TINY_MODEL

TRAIN = ["-m", "asrdist.cli.train"]  # torchrun runs it as python -m
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
WRAPPER = [sys.executable, "-m", "asrdist.cli.torchrun"]
TINY = [*TINY_MODEL, "--log-every=1", "--epochs=1000",
        "--checkpoint-every=50"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "PMI_", "OMPI_", "MASTER_", "RANK", "WORLD_SIZE",
                                "TORCHELASTIC", "ASRDIST_TORCHRUN"))}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env["OMP_NUM_THREADS"] = "1"
    return env


def _start(launcher: list[str], corpus, out: Path, log: Path, algo: str = "ssgd",
           *extra: str) -> subprocess.Popen:
    data, targets = corpus
    with open(log, "w") as f:
        return subprocess.Popen(
            [*launcher, "--nproc-per-node=2", f"--master-port={free_port()}", *extra, *TRAIN,
             "--data", str(data), "--targets", str(targets), "--out", str(out),
             "--algo", algo, *TINY], env=_env(), stdout=f, stderr=subprocess.STDOUT)


def _learner_pids(proc: subprocess.Popen, out: Path, log: Path) -> dict[int, int]:
    """The learners' pids (from their rendezvous lines), once both are training."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        found = dict((int(r), int(p)) for r, p in re.findall(
            r"learner (\d)/2 \(local \d, node \S+, pid (\d+)\)", log.read_text()))
        if len(found) == 2 and all(metrics_path(out, r).is_file() for r in range(2)):
            time.sleep(0.5)
            return found
        time.sleep(0.1)
    pytest.fail("learners not training: " + log.read_text()[-3000:])


def _wait(proc: subprocess.Popen, limit: float = 60) -> tuple[int, float]:
    t0 = time.monotonic()
    try:
        return proc.wait(timeout=limit), time.monotonic() - t0
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


@pytest.mark.parametrize("target", ["learner 1", "torchrun"])
def test_a_stop_under_asrdist_torchrun_exits_75(corpus, tmp_path, target):
    out, log = tmp_path / "run", tmp_path / "log.txt"
    proc = _start(WRAPPER, corpus, out, log)
    pids = _learner_pids(proc, out, log)
    os.kill(pids[1] if target == "learner 1" else proc.pid, signal.SIGTERM)
    code, _ = _wait(proc)
    text = log.read_text()
    assert code == STOPPED_STATUS, text[-3000:]
    assert text.strip().splitlines()[-1] == (
        "asrdist-torchrun: learner(s) 0, 1 stopped after a checkpoint; continue with --resume "
        f"(exit status {STOPPED_STATUS})"), text[-3000:]
    assert "Traceback" not in text
    assert all(list_checkpoints(out, r) for r in range(2))


def test_plain_torchrun_reports_a_stop_as_a_failure_which_the_learners_explain(corpus,
                                                                            tmp_path):
    """What asrdist-torchrun is for: torchrun's own status for the same stop is 1."""
    out, log = tmp_path / "run", tmp_path / "log.txt"
    proc = _start(TORCHRUN, corpus, out, log)
    pids = _learner_pids(proc, out, log)
    os.kill(pids[1], signal.SIGTERM)
    code, _ = _wait(proc)
    text = log.read_text()
    assert code == 1 and "ChildFailedError" in text
    assert "learner 1 stopped by SIGTERM" in text
    assert "asrdist-torchrun (same arguments) returns 75" in text


@pytest.mark.parametrize("launcher", ["torchrun", "asrdist-torchrun"])
def test_a_killed_learner_ends_the_job_at_once_named_by_rank(corpus, tmp_path, launcher):
    out, log = tmp_path / "run", tmp_path / "log.txt"
    proc = _start(TORCHRUN if launcher == "torchrun" else WRAPPER, corpus, out, log,
                  "adpsgd-random")
    pids = _learner_pids(proc, out, log)
    os.kill(pids[1], signal.SIGKILL)
    code, seconds = _wait(proc)
    text = log.read_text()
    assert code == 1 and seconds < 5, (seconds, text[-3000:])
    survivor = [ln for ln in text.splitlines() if ln.startswith("asrdist: learner 0: ")]
    assert survivor and re.search(r"\blearner 1\b", survivor[0]), text[-3000:]
    if launcher == "asrdist-torchrun":
        assert text.strip().splitlines()[-2:] == ["asrdist-torchrun: learner 0: exit status 1",
                                                  "asrdist-torchrun: learner 1: killed by "
                                                  "SIGKILL"], text[-2000:]


@pytest.mark.parametrize("launcher", ["torchrun", "asrdist-torchrun"])
def test_max_restarts_is_refused_at_start(corpus, tmp_path, launcher):
    out, log = tmp_path / "run", tmp_path / "log.txt"
    proc = _start(TORCHRUN if launcher == "torchrun" else WRAPPER, corpus, out, log, "ssgd",
                  "--max-restarts=1")
    code, seconds = _wait(proc, limit=120)
    text = log.read_text()
    assert code == 1, text[-3000:]
    assert "--max-restarts 1: asrdist learners are not restarted in a running job" in text
    if launcher == "asrdist-torchrun":  # before any learner starts: one line
        assert text.strip().splitlines() == [
            line for line in text.strip().splitlines() if line.startswith("Error: ")]
        assert len(text.strip().splitlines()) == 1 and seconds < 10
    assert not metrics_path(out, 0).exists()
