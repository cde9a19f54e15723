"""`make gpu-check` in its CPU mode: the same code at tiny size, so the test run keeps it
working on machines without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_every_part_at_tiny_size_and_writes_nothing(tmp_path):
    out = tmp_path / "RESULTS.md"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run([sys.executable, "-m", "bench.gpu_check", "--tiny", "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("gpu-check: --tiny; running the same checks at tiny size on the CPU")
    for part in ("CUDA tests", "BLSTM forward + backward", "Trainer against a bare loop",
                 "ADPSGD exchange staging per step", "NG-SGD against SGD",
                 "Every strategy's learners on the one device",
                 "Simulated learners together and one at a time"):
        assert f"### {part}" in lines
    assert any(line.startswith("`pytest -m cuda tests`: ") and "FAILED" not in line
               for line in lines)
    rows = {line.split("|")[1].strip(): line.split("|")[3].strip() for line in lines
            if line.startswith("| ") and line.count("|") == 6}
    # the strategies a fresh process registers (this one may hold test plugins)
    names = subprocess.run([sys.executable, "-c", "from asrdist.parallel import registry; "
                            "print(*registry.algo_names())"], cwd=REPO, env=env, text=True,
                           capture_output=True, check=True).stdout.split()
    assert "ssgd" in names and "hadpsgd" in names
    for algo in names:
        if algo != "single":
            assert rows.get(algo) == "0", algo  # ran to its end as real processes
    assert any(line.startswith("| ssgd | 2 | together |") for line in lines)
    assert not out.exists()
