"""A learner killed mid-run ends the job, named, within the timeout; --resume continues it."""

from __future__ import annotations

import pytest

from tests.parallel.conftest import ok, run_learners

TIMEOUT_S = 6.0


@pytest.mark.parametrize("algo,n,options", [("adpsgd-random", 3, {}), ("ssgd", 2, {}),
                                            ("hadpsgd", 4, {"learners_per_node": 2}),
                                            ("diloco-async", 3, {"avg_period": 4})])
def test_sigkilled_learner_ends_the_job_named_and_resume_continues(tmp_path, algo, n, options):
    killed = n - 1
    # unhindered, 3000 steps of 10 ms would take 30 s: ending sooner proves the detection
    sc = {"algo": algo, "lr": 0.05, "steps": 3000, "compute_s": 0.01, "timeout_s": TIMEOUT_S,
          "checkpoint_at": 10, "kill_at": 40, "kill_rank": killed, "options": options}
    run = run_learners(sc, n, tmp_path, timeout=60)
    assert run.codes[killed] == -9
    for r in range(n):
        if r == killed:
            continue
        assert run.codes[r] != 0, f"learner {r} exited 0 after learner {killed} was killed"
        assert "asrdist: learner" in run.stderr[r], run.stderr[r][-2000:]
        # killed after ~0.5 s: the survivors end within the timeout after that
        assert run.seconds[r] < TIMEOUT_S + 6
    named = [e for e in run.stderr if f"learner {killed}" in e or f"[{killed}]" in e]
    assert named, "no survivor named the killed learner"
    resumed = ok(run_learners({**sc, "resume": True, "steps": 30, "kill_at": None}, n, tmp_path))
    for r in resumed:
        assert r["steps"] == 30
    if algo.startswith(("adpsgd", "hadpsgd")):
        active = 2 if algo == "hadpsgd" else 1  # hadpsgd: the leader of the second node
        assert resumed[active]["resumed_round"] == 10  # its ring round was restored
        assert resumed[active]["state"]["round"] == 30
