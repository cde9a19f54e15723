"""What the learners of an elastic run say when one leaves: a frozen learner woken after it was
dropped says so (not that the store ended) and drops nobody; a hadpsgd node member whose node
lost a learner says its node leaves and who goes on (not that the job ends)."""

from __future__ import annotations

import os
import signal
import time

import torch

from asrdist.parallel.processes.preempt import STOPPED_STATUS
from tests.parallel.cli_learners import (
    TINY_MODEL,
    join_learners,
    start_learners,
    wait_for,
    when_training,
)
from tests.parallel.conftest import running_stores, stores_end

TINY = [*TINY_MODEL, "--log-every=1", "--epochs=5000", "--checkpoint-every=40",
        "--exchange-timeout=5", "--distance-every=0", "--keep-checkpoints=1", "--elastic"]


def _errs(out, world: int) -> list[str]:
    return [(out / f"err{r}.txt").read_text() for r in range(world)]


def test_a_learner_woken_after_the_run_ended_says_it_was_dropped(corpus, tmp_path):
    out = tmp_path / "run"
    stores = running_stores()
    procs = start_learners(corpus, out, "adpsgd-random", *TINY, "--max-steps=120", world=3)
    when_training(out, procs, 20)
    os.kill(procs[1].pid, signal.SIGSTOP)
    for r in (0, 2):  # they drop it after the timeout and finish
        procs[r].join(90)
    stores_end(stores)  # then the store process ends
    os.kill(procs[1].pid, signal.SIGCONT)
    codes = join_learners(procs, out, limit=60)
    errs = _errs(out, 3)
    assert codes == [0, 1, 0], [e[-1500:] for e in errs]
    said = [ln for ln in errs[1].splitlines() if ln.startswith("asrdist: learner 1:")]
    assert len(said) == 1, errs[1][-3000:]
    assert "dropped from the run: this learner was stopped for" in said[0], said
    assert "the others went on without it and have finished" in said[0], said
    assert "lost the rendezvous store" not in errs[1]
    assert (out / "final.pt").is_file()


def test_a_learner_woken_while_the_run_goes_on_names_it_and_drops_nobody(corpus, tmp_path):
    out = tmp_path / "run"
    procs = start_learners(corpus, out, "adpsgd-random", *TINY, "--max-steps=100000", world=3)
    when_training(out, procs, 20)
    os.kill(procs[1].pid, signal.SIGSTOP)
    wait_for("departure line", lambda: "learner 1 left at step" in _errs(out, 3)[0]
              + _errs(out, 3)[2])
    time.sleep(3)  # its exchange thread's waits have run out too: it wakes to failures
    os.kill(procs[1].pid, signal.SIGCONT)
    procs[1].join(30)
    os.kill(procs[0].pid, signal.SIGTERM)  # the others stop there, announced in the store
    codes = join_learners(procs, out, limit=60)
    errs = _errs(out, 3)
    assert codes == [STOPPED_STATUS, 1, STOPPED_STATUS], [e[-1500:] for e in errs]
    said = [ln for ln in errs[1].splitlines() if ln.startswith("asrdist: learner 1:")]
    assert len(said) == 1, errs[1][-3000:]
    assert "dropped from the run at step" in said[0], said
    assert "the run goes on with learners [0, 2]" in said[0], said
    log = "".join(errs)
    assert "learner 0 left" not in log and "learner 2 left" not in log, log[-3000:]


def test_a_hadpsgd_node_member_says_its_node_leaves_and_the_run_goes_on(corpus, tmp_path):
    out = tmp_path / "run"
    procs = start_learners(corpus, out, "hadpsgd", *TINY, "--max-steps=120",
                           "--learners-per-node=2", world=4)
    when_training(out, procs, 20)
    os.kill(procs[3].pid, signal.SIGKILL)
    codes = join_learners(procs, out, limit=120)
    errs = _errs(out, 4)
    assert codes == [0, 0, 1, -9], [e[-1500:] for e in errs]
    said = [ln for ln in errs[2].splitlines() if ln.startswith("asrdist: learner 2:")]
    assert len(said) == 1, errs[2][-3000:]
    assert said[0].startswith("asrdist: learner 2: leaving the run with its node (learners "
                              "2, 3), which cannot go on without a lost member: learner 3"), said
    assert said[0].endswith("the run goes on with learners [0, 1]"), said
    assert "ending the job" not in errs[2]
    assert torch.load(out / "final.pt", weights_only=True)["steps"] == 120
