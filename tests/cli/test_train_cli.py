"""asrdist-train from the command line: config file + flags, and bad input exits non-zero."""

from __future__ import annotations

import json

import kaldiio
import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from asrdist.cli.train import main
from tests.train.corpus import make_corpus, poison_features

TINY = ["--layers=1", "--units=8", "--chunk-len=10", "--batch-size=8", "--shuffle-buffer=16",
        "--heldout-utts=2", "--lr-ref-batch=8", "--log-every=2"]


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus")


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_config_file_and_flags_make_a_run_dir(corpus, tmp_path):
    data, targets = corpus
    conf = tmp_path / "train.yaml"
    conf.write_text(yaml.safe_dump({"epochs": 5, "chunk_len": 12, "seed": 3,
                                    "algo_options": {"unused": 1}}))
    out = tmp_path / "run"
    result = _run("--config", conf, "--data", data, "--targets", targets, "--out", out,
                  *TINY, "--epochs=2", "--algo-opt", "other=2")
    assert result.exit_code == 0, result.output
    used = yaml.safe_load((out / "config.yaml").read_text())
    assert used["epochs"] == 2 and used["chunk_len"] == 10 and used["seed"] == 3
    assert used["algo"] == "single" and used["algo_options"] == {"unused": 1, "other": 2}
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any(r["kind"] == "heldout" for r in records)
    assert (out / "final.pt").is_file() and (out / ".train.done").is_file()
    again = _run("--config", out / "config.yaml")  # a finished run is skipped
    assert again.exit_code == 0, again.output


def test_unknown_algo_is_refused(corpus, tmp_path):
    data, targets = corpus
    result = _run("--data", data, "--targets", targets, "--out", tmp_path / "r", "--algo", "nope")
    assert result.exit_code == 2 and "'nope' is not one of" in result.output


def test_unreadable_config_value(corpus, tmp_path):
    conf = tmp_path / "bad.yaml"
    conf.write_text("batch_size: many\n")
    result = _run("--config", conf, "--data", corpus[0], "--targets", corpus[1], "--out", tmp_path)
    assert result.exit_code == 1
    assert f"Error: {conf}: batch_size: 'many' is not a valid int" in result.output


def test_missing_targets_for_many_utterances(corpus, tmp_path):
    data, targets = corpus
    lines = (targets / "pdf.scp").read_text().splitlines()
    (targets / "pdf.scp").write_text(lines[0] + "\n")
    result = _run("--data", data, "--targets", targets, "--out", tmp_path / "r", *TINY)
    assert result.exit_code == 1
    assert "targets missing for 11 of 12 utterances" in result.output


def test_feature_dimension_not_matching_the_model(corpus, tmp_path):
    data, targets = corpus
    out = tmp_path / "run"
    first = _run("--data", data, "--targets", targets, "--out", out, *TINY, "--epochs=1",
                 "--max-steps=2")
    assert first.exit_code == 0, first.output
    (out / ".train.done").unlink()
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path / 'f8.ark'},{tmp_path / 'f8.scp'}") as w:
        for utt, mat in kaldiio.load_scp(str(data / "feats.scp")).items():
            w(utt, np.asarray(mat)[:, :8])
    (data / "feats.scp").write_text((tmp_path / "f8.scp").read_text())
    result = _run("--data", data, "--targets", targets, "--out", out, *TINY, "--epochs=1",
                  "--cmvn=utt", "--resume")
    assert result.exit_code == 1
    assert "feature dimension 8" in result.output and "input dimension 13" in result.output


def test_nan_loss_exits_non_zero_naming_the_step(corpus, tmp_path):
    data, targets = corpus
    poison_features(data, 0)
    result = _run("--data", data, "--targets", targets, "--out", tmp_path / "r", *TINY,
                  "--cmvn=utt", "--heldout-utts=0")
    assert result.exit_code == 1
    assert "Error: loss is nan at step" in result.output
