"""local/launch_train.sh: the launcher the recipes start training with keeps a stop's 75."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

LAUNCH = Path(__file__).resolve().parents[2] / "local" / "launch_train.sh"


def test_torchrun_launch_keeps_the_stop_status(tmp_path):
    """Learners that checkpointed and stopped exit 75; through the recipes' torchrun launch the
    run's status is 75 too (plain torchrun would make it 1, and no wrapper would resume)."""
    learner = tmp_path / "stopping-learner"
    learner.write_text("import sys\nsys.exit(75)\n")
    learner.chmod(learner.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{tmp_path}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["bash", str(LAUNCH), "--learners", "2", "--launcher", "torchrun",
                           "--command", learner.name, "--", "--out", "exp/run"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 75, proc.stderr[-2000:]
    assert "stopped after a checkpoint; continue with --resume (exit status 75)" in proc.stderr
