"""local/slurm/train.sbatch's shell logic, run by bash with Slurm's commands stood in for: a
time limit the stop signal's lead would eat whole is refused before any learner starts."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

TEMPLATE = Path(__file__).resolve().parents[2] / "local" / "slurm" / "train.sbatch"


def _stand_in(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run_job(tmp_path: Path, limit: str, srun_status: int = 0,
            signal: str | None = None) -> tuple[subprocess.CompletedProcess, str]:
    """The template as Slurm would start it under time limit ``limit`` (squeue's %l); returns
    the process and the log of the Slurm commands it ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls"
    calls.write_text("")
    _stand_in(bin_dir, "squeue", f'echo "squeue $*" >> {calls}; echo "{limit}"')
    _stand_in(bin_dir, "srun", f'echo "srun $*" >> {calls}; exit {srun_status}')
    _stand_in(bin_dir, "scontrol", f'echo "scontrol $*" >> {calls}')
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "42", "SLURM_NNODES": "1",
           "SLURM_JOB_NODELIST": "n1", "SLURM_CPUS_PER_TASK": "2"}
    if signal is not None:
        env["SBATCH_SIGNAL"] = signal
    proc = subprocess.run(["bash", str(TEMPLATE), "--out", "exp/run"], capture_output=True,
                          text=True, env=env, timeout=30)
    return proc, calls.read_text()


@pytest.mark.parametrize("limit", ["5:00", "4:59", "1:00", "0:30"])
def test_a_time_limit_within_the_signal_lead_is_refused(tmp_path, limit):
    proc, calls = run_job(tmp_path, limit)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: job 42: --time {limit} is not longer than the stop signal's lead "
        "(--signal=USR1@300: 300 s before the limit); every start would stop before training "
        "and be requeued forever: give a longer --time")
    assert "srun" not in calls and "scontrol" not in calls


@pytest.mark.parametrize("limit", ["5:01", "24:00:00", "1-00:00:00", "UNLIMITED"])
def test_a_longer_time_limit_trains_and_a_stop_is_requeued(tmp_path, limit):
    proc, calls = run_job(tmp_path, limit, srun_status=75)
    assert proc.returncode == 75, proc.stderr
    assert "srun --cpu-bind=cores asrdist-train --resume --out exp/run" in calls
    assert "scontrol requeue 42" in calls


def test_the_lead_of_sbatch_signal_in_the_environment_counts(tmp_path):
    """SBATCH_SIGNAL overrides the script's --signal line (and a lead left out is Slurm's 60 s)."""
    proc, calls = run_job(tmp_path, "10:00", signal="B:USR1@900")
    assert proc.returncode == 1 and "(--signal=B:USR1@900: 900 s before" in proc.stderr
    proc, calls = run_job(tmp_path, "2:00", signal="USR1")
    assert proc.returncode == 0, proc.stderr
    assert "srun" in calls and "scontrol" not in calls
