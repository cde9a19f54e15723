"""Elastic runs with real learners: one SIGKILLed mid-run, the others go on without it, name
it and the step it left at, and finish with their own average (no hang: bounded waits)."""

from __future__ import annotations

import re

import pytest
import torch

from tests.parallel.conftest import run_learners

TIMEOUT_S = 5.0
STEPS, KILL_AT = 300, 30


def _survivors_averaged(results: list[dict | None], survivors: list[int]) -> None:
    """Every survivor exports the same weights: the mean of what the survivors put in."""
    put_in = [results[r]["averaged"] for r in survivors]  # type: ignore[index]
    assert all(len(x) == 1 for x in put_in), "the final average ran other than once"
    mean = torch.stack([x[0] for x in put_in]).mean(0)
    for r in survivors:
        final = results[r]["final"]  # type: ignore[index]
        assert torch.allclose(final, mean, atol=1e-6), f"learner {r}: not the survivors' mean"


@pytest.mark.parametrize(("algo", "options", "killed", "gone"), [
    ("adpsgd-random", {}, 2, [2]),
    ("adpsgd-fixed", {}, 1, [1]),   # an active learner lost: learner 3 turns active
    ("hadpsgd", {"learners_per_node": 2}, 3, [2, 3]),  # learner 3's node leaves whole
])
def test_killed_learner_is_dropped_and_the_others_finish(tmp_path, algo, options, killed, gone):
    sc = {"algo": algo, "lr": 0.05, "steps": STEPS, "compute_s": 0.01, "timeout_s": TIMEOUT_S,
          "kill_at": KILL_AT, "kill_rank": killed, "record_average": True,
          "options": {"elastic": True, **options}}
    run = run_learners(sc, 4, tmp_path, timeout=90)
    survivors = [r for r in range(4) if r not in gone]
    assert run.codes[killed] == -9
    for r in survivors:
        assert run.codes[r] == 0, f"learner {r} exited {run.codes[r]}:\n{run.stderr[r][-3000:]}"
        assert run.results[r]["steps"] == STEPS  # type: ignore[index]
    for r in set(gone) - {killed}:  # the rest of the node ends on its failed allreduce
        assert run.codes[r] == 1, run.stderr[r][-2000:]
    log = "".join(run.stderr)
    for r in gone:
        lines = re.findall(rf"learner {r} left at step (\d+) .*going on with learners "
                           rf"\[([\d, ]+)\]", log)
        assert len(lines) == 1, f"learner {r}: {lines}\n{log[-3000:]}"
        if r == killed:  # its last heartbeat: a few steps before the kill at most
            assert KILL_AT - 30 <= int(lines[0][0]) <= KILL_AT, lines
    _survivors_averaged(run.results, survivors)
    exchanges = [run.results[r]["metrics"]["exchanges"] for r in survivors]  # type: ignore
    assert exchanges[0] > 0  # learner 0 is on the ring (hadpsgd: the leader of node 0)
