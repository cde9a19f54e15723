"""Elastic runs with real learners: one SIGKILLed mid-run, the others go on without it, name
it and the step it left at, and finish with their own average (no hang: bounded waits)."""

from __future__ import annotations

import os
import re
import signal
import threading
import time

import pytest
import torch
from click.testing import CliRunner

from asrdist.cli.train import main as train_main
from asrdist.parallel.processes.preempt import STOPPED_STATUS
from asrdist.train.metrics import metrics_path, read_metrics
from tests.parallel.cli_learners import (
    TINY_MODEL,
    join_learners,
    start_learners,
    train_records,
    wait_for,
    when_training,
)
from tests.parallel.conftest import run_learners, running_stores, stores_end

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
    ("adpsgd-random", {}, 0, [0]),  # learner 0, which started the store process
    ("adpsgd-fixed", {}, 1, [1]),   # an active learner lost: learner 3 turns active
    ("hadpsgd", {"learners_per_node": 2}, 3, [2, 3]),  # learner 3's node leaves whole
    ("hadpsgd", {"learners_per_node": 2}, 0, [0, 1]),  # node 0 leaves: learner 2 exports
], ids=["random-lose-2", "random-lose-0", "fixed-lose-1", "hadpsgd-lose-node-1",
        "hadpsgd-lose-node-0"])
def test_killed_learner_is_dropped_and_the_others_finish(tmp_path, algo, options, killed, gone):
    sc = {"algo": algo, "lr": 0.05, "steps": STEPS, "compute_s": 0.01, "timeout_s": TIMEOUT_S,
          "kill_at": KILL_AT, "kill_rank": killed, "record_average": True,
          "options": {"elastic": True, **options}}
    stores = running_stores()
    run = run_learners(sc, 4, tmp_path, timeout=90)
    stores_end(stores)  # the survivors closed, the lost one was dropped
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
    assert exchanges[0] > 0  # the lowest survivor is on the ring (hadpsgd: node 0's leader)


def test_an_elastic_run_leaves_no_store_process(tmp_path):
    """Every learner closes: the store process ends then, not after its idle bound (30 s)."""
    sc = {"algo": "adpsgd-random", "lr": 0.05, "steps": 50, "timeout_s": TIMEOUT_S,
          "options": {"elastic": True}}
    stores = running_stores()
    run = run_learners(sc, 2, tmp_path, timeout=60)
    assert run.codes == [0, 0], run.stderr
    stores_end(stores, limit=10.0)


TINY = [*TINY_MODEL, "--log-every=1", "--epochs=50",
        "--max-steps=120", "--checkpoint-every=40", "--exchange-timeout=5",
        "--distance-every=0", "--keep-checkpoints=1"]



def test_asrdist_train_elastic_exports_the_survivors_average(corpus, tmp_path):
    out = tmp_path / "run"
    procs = start_learners(corpus, out, "adpsgd-random", *TINY, "--elastic", world=4)
    when_training(out, procs, 20)
    os.kill(procs[2].pid, signal.SIGKILL)
    codes = join_learners(procs, out, limit=120)
    errs = [(out / f"err{r}.txt").read_text() for r in range(4)]
    assert codes == [0, 0, -9, 0], [e[-1500:] for e in errs]
    assert not any("terminate called" in e for e in errs), errs  # no thread left in gloo
    lines = [ln for e in errs for ln in e.splitlines() if "learner 2 left at step" in ln]
    assert len(lines) == 1, errs
    assert "going on with learners [0, 1, 3]" in lines[0]
    for r in (0, 1, 3):
        assert train_records(out, r)[-1]["step"] == 120
    final = torch.load(out / "final.pt", weights_only=True)
    assert final  # written by learner 0 after the survivors' average
    left_at = int(re.search(r"learner 2 left at step (\d+)", lines[0]).group(1))
    lost = [{"rank": 2, "step": left_at}]  # world_size 4 alone hid it
    assert (final["world_size"], final["learners_lost"]) == (4, lost)
    averaged = [x for x in read_metrics(metrics_path(out, 0)) if x.get("final")]
    assert [x["learners_lost"] for x in averaged] == [lost]


@pytest.mark.parametrize("killed", [1, 2], ids=["the-only-active", "a-passive"])
def test_survivors_export_at_once_after_a_departure_not_after_the_timeout(corpus, tmp_path,
                                                                          killed):
    """With --exchange-timeout 30, the survivors of a SIGKILL average and export within
    seconds. Their ring's exchange threads used to wait for the lost learner until the
    timeout: a passive one left waiting for DONE from a lost active (gloo cannot interrupt its
    receive), or from an active whose thread had ended with the lost peer (never sent)."""
    out = tmp_path / "run"
    options = [o for o in TINY if not o.startswith("--exchange-timeout")]
    procs = start_learners(corpus, out, "adpsgd-random", *options, "--elastic",
                           "--exchange-timeout=30", world=3)
    when_training(out, procs, 20)
    os.kill(procs[killed].pid, signal.SIGKILL)
    killed_at = time.monotonic()
    codes = join_learners(procs, out, limit=120)
    took = time.monotonic() - killed_at
    errs = [(out / f"err{r}.txt").read_text() for r in range(3)]
    assert codes == [-9 if r == killed else 0 for r in range(3)], [e[-1500:] for e in errs]
    assert took < 15, f"the survivors took {took:.1f} s after the kill: {errs}"
    assert not any("terminate called" in e for e in errs), errs
    assert (out / "final.pt").is_file()
    survivors = [r for r in range(3) if r != killed]
    assert any(f"going on with learners {survivors}" in e for e in errs), errs


@pytest.mark.parametrize("algo", ["adpsgd-random", "diloco-async"])
def test_asrdist_train_losing_learner_0_exports_from_the_lowest_survivor(corpus, tmp_path, algo):
    """diloco-async: its outer state lives in the store process, which also writes it to the
    run dir at each checkpoint."""
    out = tmp_path / "run"
    stores = running_stores()
    procs = start_learners(corpus, out, algo, *TINY, "--elastic", world=4)
    when_training(out, procs, 20)
    os.kill(procs[0].pid, signal.SIGKILL)
    codes = join_learners(procs, out, limit=120)
    errs = [(out / f"err{r}.txt").read_text() for r in range(4)]
    assert codes == [-9, 0, 0, 0], [e[-1500:] for e in errs]
    lines = [ln for e in errs for ln in e.splitlines() if "learner 0 left at step" in ln]
    assert len(lines) == 1, errs
    assert "going on with learners [1, 2, 3]" in lines[0]
    for r in (1, 2, 3):
        assert train_records(out, r)[-1]["step"] == 120
    final = torch.load(out / "final.pt", weights_only=True)  # learner 1 wrote it
    assert final["steps"] == 120 and final["world_size"] == 4, final.keys()
    assert str(out / "final.pt") in errs[1] and str(out / "final.pt") not in errs[2] + errs[3]
    averaged = [x for x in read_metrics(metrics_path(out, 1)) if x.get("final")]
    assert len(averaged) == 1  # the held-out figures of the exported average, in its file
    assert train_records(out, 0)[-1]["step"] < 120  # metrics.jsonl ends where learner 0 did
    stores_end(stores)
    if algo == "diloco-async":
        assert torch.load(out / "outer_state.pt")["step"] == 120  # the last checkpoint's


def test_elastic_is_refused_by_fail_stop_strategies(corpus, tmp_path):
    data, targets = corpus
    result = CliRunner().invoke(train_main, [
        "--data", str(data), "--targets", str(targets), "--out", str(tmp_path / "run"),
        "--algo", "ssgd", "--elastic", *TINY])
    assert result.exit_code != 0
    assert "--elastic: --algo ssgd is fail-stop" in result.output
    assert not (tmp_path / "run" / "final.pt").exists()


def test_elastic_run_stops_on_a_signal_and_resumes_with_whoever_is_launched(corpus, tmp_path):
    out = tmp_path / "run"
    longer = [*TINY, "--elastic", "--max-steps=100000"]
    procs = start_learners(corpus, out, "adpsgd-random", *longer, world=4)
    when_training(out, procs, 10)
    os.kill(procs[2].pid, signal.SIGKILL)
    wait_for("departure line", lambda: any(
        "learner 2 left at step" in (out / f"err{r}.txt").read_text() for r in (0, 1, 3)))
    os.kill(procs[0].pid, signal.SIGTERM)  # announced to the survivors through the store
    codes = join_learners(procs, out, limit=120)
    errs = [(out / f"err{r}.txt").read_text() for r in range(4)]
    assert codes == [STOPPED_STATUS, STOPPED_STATUS, -9, STOPPED_STATUS], errs
    stopped = {r: train_records(out, r)[-1]["step"] for r in (0, 1, 3)}
    # three learners launched: ranks 0 and 1 go on from their checkpoints, rank 2 from the
    # lost learner's (none: it starts afresh); learner 3's files are not read
    again = start_learners(corpus, out, "adpsgd-random", *TINY, "--elastic", "--resume",
                           f"--max-steps={max(stopped.values()) + 30}", world=3)
    codes = join_learners(again, out, limit=120)
    errs = [(out / f"err{r}.txt").read_text() for r in range(3)]
    assert codes == [0, 0, 0], [e[-1500:] for e in errs]
    for r in (0, 1):
        starts = [x for x in read_metrics(metrics_path(out, r)) if x["kind"] == "start"]
        assert starts[-1]["resumed"] and starts[-1]["step"] == stopped[r]
    assert (out / "final.pt").is_file()


def test_a_frozen_learner_is_dropped_after_the_timeout_and_ends_when_it_wakes(tmp_path):
    """SIGSTOP: no process gone, only silence; the survivors drop it after the timeout and
    finish; woken once dropped, it finds itself dropped and ends."""
    sc = {"algo": "adpsgd-random", "lr": 0.05, "steps": STEPS, "compute_s": 0.01,
          "timeout_s": TIMEOUT_S, "freeze_at": KILL_AT, "freeze_rank": 1,
          "record_average": True, "options": {"elastic": True}}

    def wake_once_dropped() -> None:  # while the others run (learner 0 hosts the store)
        deadline = time.monotonic() + 80
        while time.monotonic() < deadline and not any(
                "learner 1 left at step" in (tmp_path / f"err{r}.txt").read_text()
                for r in (0, 2, 3) if (tmp_path / f"err{r}.txt").exists()):
            time.sleep(0.05)
        os.kill(int((tmp_path / "frozen.pid").read_text()), signal.SIGCONT)

    waker = threading.Thread(target=wake_once_dropped, daemon=True)
    waker.start()
    run = run_learners(sc, 4, tmp_path, timeout=90)
    waker.join()
    for r in (0, 2, 3):
        assert run.codes[r] == 0, f"learner {r} exited {run.codes[r]}:\n{run.stderr[r][-3000:]}"
    assert run.codes[1] == 1, run.stderr[1][-2000:]
    assert "dropped from the run at step" in run.stderr[1], run.stderr[1][-2000:]
    log = "".join(run.stderr)
    assert len(re.findall(r"learner 1 left at step \d+ ", log)) == 1, log[-3000:]
    _survivors_averaged(run.results, [0, 2, 3])
