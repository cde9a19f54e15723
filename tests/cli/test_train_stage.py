"""asrdist-train under the one stage rule (asrdist.stage): a finished run rerun with the same
options and inputs is skipped; with other options or inputs it is trained again from scratch,
its old checkpoints, metrics and final.pt moved aside first, never mixed with the new ones."""

from __future__ import annotations

import logging

import pytest
from click.testing import CliRunner

from asrdist.cli.train import main
from asrdist.testing import make_corpus
from asrdist.train.checkpoint import list_checkpoints
from asrdist.train.metrics import read_metrics

TINY = ["--layers=1", "--units=8", "--chunk-len=10", "--batch-size=8", "--shuffle-buffer=16",
        "--heldout-utts=2", "--lr-ref-batch=8", "--log-every=2", "--epochs=1",
        "--checkpoint-every=2"]


@pytest.fixture
def run_dir(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    data, targets = make_corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    args = ["--data", str(data), "--targets", str(targets), "--out", str(out), *TINY]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    return out, args


def _files(out):
    """The run dir's files and their times (the learners' lock files aside: a run, skipped
    or not, takes them)."""
    return {p: p.stat().st_mtime_ns for p in out.rglob("*")
            if p.is_file() and not p.name.startswith(".lock.")}


def test_unchanged_rerun_is_skipped(run_dir, caplog):
    out, args = run_dir
    before = _files(out)
    # --resume, --log-every and --device do not change the model: still done
    again = CliRunner().invoke(main, [*args, "--resume", "--log-every=1", "--device=cpu"])
    assert again.exit_code == 0, again.output
    assert (f"{out}: train already done with these options and inputs; skipping "
            f"(remove {out / '.train.done'} to redo)") in caplog.text
    assert _files(out) == before


def test_other_option_retrains_from_scratch_without_resume(run_dir, caplog):
    out, args = run_dir
    assert list_checkpoints(out, 0)
    marked = (out / ".train.done").stat().st_mtime_ns
    other = CliRunner().invoke(main, [*args, "--epochs=2"])  # no "pass --resume" refusal
    assert other.exit_code == 0, other.output
    assert (f"{out}: train was done with other options or inputs (epochs 1 -> 2); "
            "redoing it") in caplog.messages
    starts = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "start"]
    assert [(s["step"], s["resumed"]) for s in starts] == [(0, False)]  # old records gone
    assert all(p.stat().st_mtime_ns > marked for p in list_checkpoints(out, 0).values())
    assert (out / "final.pt").stat().st_mtime_ns > marked
    again = CliRunner().invoke(main, [*args, "--epochs=2", "--resume"])
    assert again.exit_code == 0 and "skipping" in caplog.messages[-1]


def test_changed_targets_retrain(run_dir, caplog):
    out, args = run_dir
    targets = out.parent / "corpus" / "targets"
    counts = (targets / "pdf_counts").read_text().split()  # "[ c0 c1 ... ]"
    (targets / "pdf_counts").write_text(" ".join([counts[0], "1000", *counts[2:]]) + "\n")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert f"input {targets / 'pdf_counts'}" in caplog.text and "redoing it" in caplog.text


def test_an_interrupted_retraining_resumes_its_own_checkpoints(run_dir, caplog):
    out, args = run_dir
    assert CliRunner().invoke(main, [*args, "--epochs=2"]).exit_code == 0
    # the first run went to superseded/ with its marker, so as if that retraining had been
    # killed before its end (no final.pt, no marker), --resume continues it
    assert len(list((out / "superseded").glob("*/train.done.json"))) == 1
    (out / ".train.done").unlink()
    (out / "final.pt").unlink()
    resumed = CliRunner().invoke(main, [*args, "--epochs=2", "--resume"])
    assert resumed.exit_code == 0, resumed.output
    starts = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "start"]
    assert [s["resumed"] for s in starts] == [False, True] and starts[1]["step"] > 0
    assert (out / "final.pt").is_file()
