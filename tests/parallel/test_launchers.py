"""asrdist-train end to end with 2 learners under mpiexec, torchrun and srun's environment."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from asrdist.parallel.launch.rendezvous import free_port
from asrdist.train.metrics import metrics_path, read_metrics
from tests.parallel.cli_learners import TINY_MODEL

BIN = Path(sys.executable).parent
TRAIN = [sys.executable, "-m", "asrdist.cli.train"]  # torchrun takes it without python
TINY = [*TINY_MODEL, "--log-every=2", "--epochs=1"]


def _args(corpus, out: Path, algo: str, *extra: str) -> list[str]:
    data, targets = corpus
    return ["--data", str(data), "--targets", str(targets), "--out", str(out), "--algo", algo,
            *TINY, "--exchange-timeout=60", *extra]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "PMI_", "OMPI_", "MASTER_", "RANK", "WORLD_SIZE"))}
    env["PATH"] = f"{BIN}:{env['PATH']}"
    env["OMP_NUM_THREADS"] = "1"
    return env


def _check_run(out: Path, proc: subprocess.CompletedProcess, *, key: str) -> None:
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (out / "final.pt").is_file()
    for rank in range(2):
        train = [r for r in read_metrics(metrics_path(out, rank)) if r["kind"] == "train"]
        assert train and key in train[-1], train[-1:]


def test_mpiexec_two_learners_adpsgd_with_a_slow_learner(corpus, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([str(BIN / "mpiexec"), "-n", "2", *TRAIN,
                           *_args(corpus, out, "adpsgd-random", "--slow-learner", "1:2")],
                          env=_env(), capture_output=True, text=True, timeout=240)
    _check_run(out, proc, key="exchanges")
    used = yaml.safe_load((out / "config.yaml").read_text())
    assert used["slow_learner"] == "1:2" and used["exchange_timeout"] == 60.0
    slept = [sum(r["slowdown_s"] for r in read_metrics(metrics_path(out, rank))
                 if r["kind"] == "train") for rank in range(2)]
    assert slept[0] == 0 and slept[1] > 0


@pytest.mark.skipif(shutil.which("torchrun", path=str(BIN)) is None, reason="no torchrun")
def test_torchrun_two_learners_ssgd(corpus, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([str(BIN / "torchrun"), "--nproc-per-node", "2",
                           f"--master-port={free_port()}", *TRAIN[1:], *_args(corpus, out, "ssgd")],
                          env=_env(), capture_output=True, text=True, timeout=240)
    _check_run(out, proc, key="comm_wait_s")
    final = torch.load(out / "final.pt", weights_only=True)["model"]
    assert all(torch.isfinite(v).all() for v in final.values())


def test_srun_environment_two_learners_ma(corpus, tmp_path):
    """What srun sets for 2 tasks on one node; the store port comes from SLURM_JOB_ID."""
    out = tmp_path / "run"
    job_id = free_port() - 20000
    procs = []
    for rank in range(2):
        env = _env() | {
            "SLURM_JOB_ID": str(job_id), "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank), "SLURM_NODEID": "0", "SLURM_NTASKS": "2",
            "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "localhost",
            "SLURM_JOB_NODELIST": "localhost", "SLURMD_NODENAME": "localhost",
        }
        procs.append(subprocess.Popen([*TRAIN, *_args(corpus, out, "ma", "--avg-period", "2")],
                                      env=env, stderr=subprocess.PIPE, text=True))
    errs = [p.communicate(timeout=240)[1] for p in procs]
    for p, err in zip(procs, errs, strict=True):
        assert p.returncode == 0, err[-4000:]
    _check_run(out, subprocess.CompletedProcess([], 0, "", ""), key="averages")
    assert yaml.safe_load((out / "config.yaml").read_text())["avg_period"] == 2
    last = [r for r in read_metrics(metrics_path(out, 0)) if r["kind"] == "train"][-1]
    assert last["averages"] == last["step"] // 2


@pytest.mark.parametrize(("args", "message"), [
    (["--learners", "2", "--launcher", "ssh", "--", "--help"], "--launcher ssh: choose auto"),
    (["--learner", "2", "--", "--help"], "unknown option --learner"),
])
def test_launch_train_sh_refuses_bad_options(args, message):
    script = Path(__file__).resolve().parents[2] / "local" / "launch_train.sh"
    proc = subprocess.run(["bash", str(script), *args], env=_env(), capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr


def test_mpiexec_names_a_learner_killed_mid_run(corpus, tmp_path):
    """MPICH kills the survivors within 0.2 s, so the killed learner's supervisor names it."""
    out, err = tmp_path / "run", tmp_path / "stderr.txt"
    with open(err, "w") as f:
        proc = subprocess.Popen([str(BIN / "mpiexec"), "-n", "2", *TRAIN,
                                 *_args(corpus, out, "adpsgd-random", "--epochs=1000")],
                                env=_env(), stdout=subprocess.DEVNULL, stderr=f)
    try:
        pid, deadline = None, time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            found = re.search(r"learner 1/2 \(local 1, node \S+, pid (\d+)\)", err.read_text())
            if found and metrics_path(out, 1).is_file():
                pid = int(found.group(1))
                break
            time.sleep(0.1)
        assert pid is not None, err.read_text()[-3000:]
        os.kill(pid, signal.SIGKILL)
        t0 = time.monotonic()
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert code != 0 and time.monotonic() - t0 < 10
    assert f"asrdist: learner 1: killed by SIGKILL (pid {pid})" in err.read_text(), \
        err.read_text()[-3000:]
