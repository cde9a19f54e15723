"""TensorBoard event files: every metrics.jsonl figure read back at its step; a resumed run's
events after the checkpoint are dropped; learner r's in DIR/learnerR under --tensorboard-all;
none without the package (one line) or with --tensorboard none."""

from __future__ import annotations

import logging
import sys

import pytest
from click.testing import CliRunner

from asrdist.cli.train import main as train
from asrdist.testing import make_corpus
from asrdist.train.checkpoint import list_checkpoints
from asrdist.train.metrics import read_metrics
from tests.parallel.cli_learners import TINY_MODEL, join_learners, start_learners

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="the tensorboard extra is not installed")


def _scalars(logdir) -> dict[str, list[tuple[int, float]]]:
    acc = event_accumulator.EventAccumulator(str(logdir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _run(data, targets, out, *extra):
    return CliRunner().invoke(train, ["--data", str(data), "--targets", str(targets),
                                      "--out", str(out), *TINY_MODEL, "--log-every=2", *extra])


def test_every_figure_of_metrics_jsonl_is_a_scalar_at_its_step(tmp_path):
    data, targets = make_corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    assert _run(data, targets, out, "--epochs=2").exit_code == 0
    records = read_metrics(out / "metrics.jsonl")
    scalars = _scalars(out)
    train_records = [r for r in records if r["kind"] == "train"]
    assert len(train_records) > 2
    for name in ("loss", "lr", "frames_per_s"):
        got = scalars[f"train/{name}"]
        assert [s for s, _ in got] == [r["step"] for r in train_records]
        assert [v for _, v in got] == pytest.approx([r[name] for r in train_records], rel=1e-6)
    heldout = [r for r in records if r["kind"] == "heldout"]
    assert [v for _, v in scalars["heldout/heldout_ce"]] == pytest.approx(
        [r["heldout_ce"] for r in heldout], rel=1e-6)


def test_a_resumed_run_drops_the_events_after_its_checkpoint(tmp_path):
    data, targets = make_corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    assert _run(data, targets, out, "--epochs=2", "--checkpoint-every=4", "--log-every=1",
                "--max-steps=9").exit_code == 0
    # as if killed after step 9 before its checkpoint: the run resumes from step 8's
    for name in ("final.pt", ".train.done"):
        (out / name).unlink()
    list_checkpoints(out, 0)[9].unlink()
    assert [s for s, _ in _scalars(out)["train/loss"]][-1] > 8
    assert _run(data, targets, out, "--epochs=2", "--checkpoint-every=4", "--log-every=1",
                "--resume", "--max-steps=12").exit_code == 0
    steps = [s for s, _ in _scalars(out)["train/loss"]]
    assert steps == sorted(set(steps)) and steps[-1] == 12  # nothing twice: after 8 purged
    assert steps == [r["step"] for r in read_metrics(out / "metrics.jsonl")
                     if r["kind"] == "train"]


def test_two_learners_write_their_own_runs_under_tensorboard_all(tmp_path):
    corpus = make_corpus(tmp_path / "corpus", num_utts=16)
    out, logdir = tmp_path / "run", tmp_path / "tb"
    procs = start_learners(corpus, out, "adpsgd-random", *TINY_MODEL, "--epochs=1",
                           "--log-every=2", f"--tensorboard={logdir}", "--tensorboard-all")
    assert join_learners(procs, out, limit=120) == [0, 0]
    for where, metrics in ((logdir, "metrics.jsonl"), (logdir / "learner1",
                                                         "metrics.rank1.jsonl")):
        train_records = [r for r in read_metrics(out / metrics) if r["kind"] == "train"]
        assert [s for s, _ in _scalars(where)["train/loss"]] == [r["step"] for r in
                                                                 train_records]
    assert not list(out.glob("events.out.tfevents*"))  # --tensorboard elsewhere


def test_without_the_package_one_line_says_so_and_none_writes_nothing(tmp_path, monkeypatch,
                                                                      caplog):
    data, targets = make_corpus(tmp_path / "corpus")
    assert _run(data, targets, tmp_path / "off", "--epochs=1",
                "--tensorboard=none").exit_code == 0
    assert not list((tmp_path / "off").glob("events.out.tfevents*"))
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    with caplog.at_level(logging.WARNING):
        assert _run(data, targets, tmp_path / "absent", "--epochs=1").exit_code == 0
    assert "tensorboard is not installed (pip install 'asrdist[tensorboard]')" in caplog.text
    assert not list((tmp_path / "absent").glob("events.out.tfevents*"))
    assert (tmp_path / "absent" / "final.pt").is_file()
