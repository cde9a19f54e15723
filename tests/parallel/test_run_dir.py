"""A cluster user's mistakes, with real learners (asrdist-train's CLI, forked, torchrun's
variables): two runs on one --out, a --resume that would change what the run is, and bad data
that only training reads.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from asrdist.cli.train import main as train_main
from asrdist.parallel.processes.preempt import STOPPED_STATUS
from asrdist.testing import cut_unsampled_utterance, make_corpus
from asrdist.train.checkpoint import list_checkpoints
from asrdist.train.metrics import metrics_path, read_metrics
from asrdist.train.runlock import RunLock
from tests.parallel.cli_learners import (
    TINY_MODEL,
    fork_learners,
    join_learners,
    start_learners,
    when_training,
)

TINY = [*TINY_MODEL, "--log-every=1", "--epochs=50",
        "--checkpoint-every=25", "--exchange-timeout=20", "--distance-every=0",
        "--keep-checkpoints=1"]



def _errs(out: Path, n: int = 2) -> list[str]:
    return [(out / f"err{r}.txt").read_text() for r in range(n)]


def _error_line(err: str, rank: int) -> str:
    """Learner ``rank``'s ``Error:`` line (torch's C++ warnings may follow it in a forked
    learner, which imported torch before asrdist.cli could turn them off)."""
    lines = [ln for ln in err.splitlines() if ln.startswith(f"Error: learner {rank}: ")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


def _starts(out: Path, rank: int = 0) -> list[dict]:
    return [r for r in read_metrics(metrics_path(out, rank)) if r["kind"] == "start"]


def test_a_second_run_on_the_same_out_is_refused_naming_the_first(corpus, tmp_path,
                                                                  monkeypatch):
    """A double submit, fresh and with --resume, while the first run trains: refused in one
    line naming its holder; the first run goes on. After a crash the lock is taken over."""
    out = tmp_path / "run"
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # the first job's id, as Slurm would set it
    first = start_learners(corpus, out, "ssgd", *TINY, "--max-steps=2000")
    monkeypatch.delenv("SLURM_JOB_ID")
    try:
        when_training(out, first, 3)
        other = tmp_path / "second"  # the second run's stderr files
        for extra in ([], ["--resume"]):
            procs = _start_on(corpus, out, other, *extra)
            assert join_learners(procs, other) == [1, 1], _errs(other)
            pids = {p.pid for p in first}
            for rank, err in enumerate(_errs(other)):
                last = _error_line(err, rank)
                assert last.startswith(f"Error: learner {rank}: {out} is in use by another run "
                                       "(learner "), last
                assert f"on host {socket.gethostname()} (SLURM_JOB_ID=4242), since " in last
                assert any(f"pid {pid} " in last for pid in pids), (last, pids)
                assert "one run per output dir" in last and "Traceback" not in err
            assert all(p.exitcode is None for p in first), _errs(out)
        for p in first:  # the first run was untouched: it stops as it would have
            os.kill(p.pid, signal.SIGTERM)
        assert join_learners(first, out) == [STOPPED_STATUS] * 2, _errs(out)
        assert [s["resumed"] for s in _starts(out)] == [False]  # no second run wrote here
        assert all((out / f".lock.learner{r}").read_text() == "" for r in range(2))
    finally:
        for p in first:
            p.kill()
    # a run killed outright leaves its holder in the files; the next run takes them over
    killed = start_learners(corpus, out, "ssgd", *TINY, "--resume", "--max-steps=2000")
    deadline = time.monotonic() + 60
    while len(_starts(out)) < 2 and time.monotonic() < deadline:  # it holds the locks now
        time.sleep(0.02)
    when_training(out, killed, _starts(out)[-1]["step"] + 2)
    for p in killed:
        os.kill(p.pid, signal.SIGKILL)
    join_learners(killed, out)
    for rank in range(2):  # the killed run's holders are still written: stale, not held
        assert f'"pid": {killed[rank].pid},' in (out / f".lock.learner{rank}").read_text()
    step = max(list_checkpoints(out, 0))
    resumed = start_learners(corpus, out, "ssgd", *TINY, "--resume", f"--max-steps={step + 3}")
    assert join_learners(resumed, out) == [0, 0], _errs(out)
    assert (out / "final.pt").is_file()


def test_a_lock_left_by_a_killed_holder_is_taken_over_with_a_warning(tmp_path, caplog):
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from asrdist.train.runlock import RunLock; "
         f"assert RunLock({str(out)!r}, 0).acquire(); print('held', flush=True); "
         "time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    lock = RunLock(out, 0)
    assert not lock.acquire() and f"pid {holder.pid} on host {socket.gethostname()}" \
        in lock.refused
    holder.kill()
    holder.wait()
    with caplog.at_level(logging.WARNING):
        assert lock.acquire()
    assert (f"{out}: taking over from a run that ended without releasing it (learner 0, pid "
            f"{holder.pid} on host {socket.gethostname()}") in caplog.text
    lock.release()
    assert lock.path.read_text() == ""


def _start_on(corpus, out: Path, stderr_dir: Path, *extra: str) -> list:
    """Two learners training into ``out`` whose stderr files go to ``stderr_dir``."""
    data, targets = corpus
    args = ["--data", str(data), "--targets", str(targets), "--out", str(out), "--algo", "ssgd",
            *TINY, *extra]
    return fork_learners(train_main, args, stderr_dir)


def _unfinish(out: Path) -> None:
    """As if the run had been killed after its last checkpoint: no final.pt, no marker."""
    (out / "final.pt").unlink()
    (out / ".train.done").unlink()


@pytest.mark.parametrize(("change", "said"), [
    (["--batch-size=8"], "--batch-size 8 (the run's: 4)"),
    (["--chunk-len=12"], "--chunk-len 12 (the run's: 10)"),
    (["--lr=0.3"], "--lr 0.3 (the run's: 0.1)"),
    (["--lr-schedule=kaldi"], "--lr-schedule kaldi (the run's: ibm)"),
    (["--seed=3"], "--seed 3 (the run's: 0)"),
    ("data", "--data DATA: DATA/feats.ark changed since the run read it"),
    ("targets", "--targets TARGETS: TARGETS/pdf_counts changed since the run read it"),
])
def test_resume_refuses_a_change_of_what_the_run_is(tmp_path, change, said):
    """One learner (the CLI in this process) is enough: the check is the trainer's."""
    data, targets = make_corpus(tmp_path / "c", num_utts=12)
    out = tmp_path / "run"
    args = ["--data", str(data), "--targets", str(targets), "--out", str(out), *TINY,
            "--max-steps=4"]
    assert CliRunner().invoke(train_main, args).exit_code == 0
    _unfinish(out)
    if change == "data":  # the features file rewritten by another features stage
        ark = data / "feats.ark"
        ark.write_bytes(ark.read_bytes() + b"\0")
        change = []
    elif change == "targets":
        (targets / "pdf_counts").write_text((targets / "pdf_counts").read_text() + " ")
        change = []
    result = CliRunner().invoke(train_main, [*args, "--resume", *change])
    assert result.exit_code == 1, result.output
    line = result.output.strip()
    assert "\n" not in line and line.startswith("Error: --resume: "), line
    said = said.replace("DATA", str(data)).replace("TARGETS", str(targets))
    assert said in line and f"the checkpoint at step 4 in {out} is of another run" in line, line
    assert len(_starts(out)) == 1  # nothing written


def test_resume_free_and_deliberate_changes(tmp_path):
    """Logging, checkpointing, the device and (ibm schedule) how long to train stay free; a
    change --resume-allow names goes on and is recorded."""
    data, targets = make_corpus(tmp_path / "c", num_utts=12)
    out = tmp_path / "run"
    args = ["--data", str(data), "--targets", str(targets), "--out", str(out), *TINY]
    assert CliRunner().invoke(train_main, [*args, "--max-steps=4"]).exit_code == 0
    _unfinish(out)
    free = CliRunner().invoke(train_main, [*args, "--resume", "--max-steps=6", "--log-every=2",
                                           "--checkpoint-every=3", "--device=cpu",
                                           "--keep-checkpoints=2"])
    assert free.exit_code == 0, free.output
    assert [(s["step"], s["resumed"], "changed" in s) for s in _starts(out)] == [
        (0, False, False), (4, True, False)]
    _unfinish(out)
    refused = CliRunner().invoke(train_main, [*args, "--resume", "--max-steps=8", "--lr=0.2"])
    assert refused.exit_code == 1 and "--resume-allow lr " in refused.output, refused.output
    allowed = CliRunner().invoke(train_main, [*args, "--resume", "--max-steps=8", "--lr=0.2",
                                              "--resume-allow=lr"])
    assert allowed.exit_code == 0, allowed.output
    assert _starts(out)[-1]["changed"] == {"lr": [0.1, 0.2]}


@pytest.mark.parametrize(("change", "said"), [
    (["--algo=ssgd"], "--algo ssgd (the run's: ma)"),
    (["--algo=ma", "--avg-period=4"], "--avg-period 4 (the run's: 2)"),
])
def test_resume_of_two_learners_refuses_another_strategy_or_its_options(corpus, tmp_path,
                                                                          change, said):
    out = tmp_path / "run"
    data, targets = corpus
    base = ["--data", str(data), "--targets", str(targets), "--out", str(out), *TINY,
            "--max-steps=4"]
    procs = fork_learners(train_main, [*base, "--algo=ma", "--avg-period=2"], out)
    assert join_learners(procs, out) == [0, 0], _errs(out)
    _unfinish(out)
    procs = fork_learners(train_main, [*base, "--avg-period=2", *change, "--resume"], out)
    assert join_learners(procs, out) == [1, 1], _errs(out)
    for rank, err in enumerate(_errs(out)):
        line = _error_line(err, rank)
        assert said in line and "is of another run" in line, line


@pytest.fixture(scope="module")
def unsampled_bad(tmp_path_factory):
    """80 utterances, one outside the 64 read before training with its ark cut mid-matrix."""
    data, targets = make_corpus(tmp_path_factory.mktemp("bad") / "c", num_utts=80)
    utt = cut_unsampled_utterance(data)
    return data, targets, utt


@pytest.mark.parametrize(("algo", "timeout"), [("ssgd", 5), ("adpsgd-random", 60)])
def test_a_bad_utterance_outside_the_sample_is_named_first_and_ends_the_others_fast(
        unsampled_bad, tmp_path, algo, timeout):
    """The failing learner's line names the utterance; the other ends within 5 s citing it,
    whatever the exchange timeout, with the distance to the mean sampled (its thread's next
    collective would wait for the failed learner: --distance-every 30, the default)."""
    data, targets, utt = unsampled_bad
    out = tmp_path / "run"
    procs = fork_learners(train_main, [
        "--data", str(data), "--targets", str(targets), "--out", str(out), "--algo", algo,
        "--layers=1", "--units=8", "--chunk-len=10", "--batch-size=4", "--shuffle-buffer=16",
        "--heldout-utts=0", "--lr-ref-batch=8", "--epochs=1", f"--exchange-timeout={timeout}"],
        out)
    ended: dict[int, float] = {}
    deadline = time.monotonic() + 90
    while len(ended) < 2 and time.monotonic() < deadline:
        for r, p in enumerate(procs):
            if r not in ended and p.exitcode is not None:
                ended[r] = time.monotonic()
        time.sleep(0.02)
    codes = join_learners(procs, out, limit=5)
    errs = _errs(out)
    assert codes == [1, 1], errs
    failed = next(r for r in range(2) if f"Error: learner {r}: utterance {utt}: cannot read "
                  "features" in errs[r])
    other = 1 - failed
    assert errs[failed].strip().splitlines()[-1].startswith(f"Error: learner {failed}: "
                                                            f"utterance {utt}"), errs[failed]
    assert f"[first report: learner {failed}: utterance {utt}: cannot read features" \
        in errs[other], errs[other][-2000:]
    assert ended[other] - ended[failed] < 5, (ended, errs)
    assert "Traceback" not in errs[0] + errs[1]
