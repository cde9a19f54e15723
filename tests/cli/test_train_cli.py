"""asrdist-train from the command line: config file + flags, and bad input exits non-zero."""

from __future__ import annotations

import json

import kaldiio
import numpy as np
import pytest
import torch
import yaml
from click.testing import CliRunner

from asrdist.cli.train import main, make_strategy
from asrdist.parallel import registry
from asrdist.testing import make_corpus
from asrdist.train.config import make_config
from asrdist.train.metrics import read_metrics
from tests.train.corpus import poison_features

TINY = ["--layers=1", "--units=8", "--chunk-len=10", "--batch-size=8", "--shuffle-buffer=16",
        "--heldout-utts=2", "--lr-ref-batch=8", "--log-every=2"]


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus")


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_config_file_and_flags_make_a_run_dir(corpus, tmp_path, caplog):
    data, targets = corpus
    conf = tmp_path / "train.yaml"
    conf.write_text("epochs: 5\nchunk_len: 12\nseed: 3\navg_period: 4\nslow_learner: 0:3\n")
    out = tmp_path / "run"
    result = _run("--config", conf, "--data", data, "--targets", targets, "--out", out,
                  *TINY, "--epochs=2", "--avg-period=2")
    assert result.exit_code == 0, result.output
    used = yaml.safe_load((out / "config.yaml").read_text())
    assert used["epochs"] == 2 and used["chunk_len"] == 10 and used["seed"] == 3
    assert used["algo"] == "single" and used["avg_period"] == 2
    assert used["hadpsgd_variant"] == "fixed"  # every strategy's options, whatever --algo
    assert used["slow_learner"] == "0:3"  # a string, not YAML 1.1's sexagesimal 183
    assert "--algo single does not use --slow-learner 0:3, --avg-period 2: ignored" in caplog.text
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


def test_nan_features_exit_non_zero_naming_the_utterance(corpus, tmp_path):
    data, targets = corpus
    utt = poison_features(data, 0)
    result = _run("--data", data, "--targets", targets, "--out", tmp_path / "r", *TINY,
                  "--cmvn=utt", "--heldout-utts=0")
    assert result.exit_code == 1
    assert f"Error: utterance {utt}: features hold NaN or inf" in result.output


_NO_LAUNCHER = dict.fromkeys(["RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMI_RANK",
                              "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID",
                              "TORCHELASTIC_RUN_ID"])


def test_every_algo_with_one_learner_and_no_launcher_is_plain_sgd(corpus, tmp_path):
    """With N = 1 every strategy reduces to plain SGD, bit for bit, no process group; but
    diloco and diloco-async, whose outer Nesterov step still runs with one learner (the K = 1
    control)."""
    data, targets = corpus
    runs = {}
    for algo in registry.algo_names():
        out = tmp_path / algo
        result = CliRunner().invoke(
            main, [str(a) for a in ("--data", data, "--targets", targets, "--out", out, *TINY,
                                    "--epochs=2", "--algo", algo, "--avg-period=1")],
            env=_NO_LAUNCHER)
        assert result.exit_code == 0, (algo, result.output)
        assert not torch.distributed.is_initialized()
        runs[algo] = ([(r["step"], r["loss"]) for r in read_metrics(out / "metrics.jsonl")
                       if r["kind"] == "train"],
                      torch.load(out / "final.pt", weights_only=True)["model"])
    losses, weights = runs.pop("single")
    assert len(losses) > 3
    assert runs.pop("diloco")[0] != losses
    assert runs.pop("streaming-diloco")[0] != losses  # diloco's outer step, by fragments
    assert runs.pop("diloco-async")[0] != losses  # the same outer step, every push
    for algo, (other_losses, other_weights) in runs.items():
        assert other_losses == losses, algo
        assert all(torch.equal(weights[k], other_weights[k]) for k in weights), algo


def _strategy(corpus, tmp_path, **options):
    data, targets = corpus
    return make_strategy(make_config(None, {"data": str(data), "targets": str(targets),
                                            "out": str(tmp_path / "r"), **options}))


def test_strategy_options_reach_the_strategy(corpus, tmp_path):
    ma = _strategy(corpus, tmp_path, algo="ma", avg_period=3, exchange_timeout=7.0,
                   distance_every=0.0, slow_learner="0:3", hadpsgd_variant="random")
    assert (ma.avg_period, ma.comm.timeout_s, ma.comm._distance_every_s) == (3, 7.0, 0.0)
    assert ma.comm._slow.factor == 3.0  # this process is learner 0
    ada = _strategy(corpus, tmp_path, algo="adpsgd-random", seed=5)
    assert (ada.ring, ada.delay1, ada.seed, ada.comm.timeout_s) == ("random", False, 5, 120.0)
    had = _strategy(corpus, tmp_path, algo="hadpsgd", learners_per_node=2,
                    hadpsgd_variant="delay1", seed=4)
    assert (had.learners_per_node, had.ring, had.delay1, had.seed) == (2, "fixed", True, 4)
    assert (had.name, had.comm.timeout_s) == ("hadpsgd-delay1", 120.0)


@pytest.mark.parametrize(("flags", "world", "message"), [
    (["--slow-learner", "x"], 1, "--slow-learner 'x': expected RANK:FACTOR, e.g. 1:3"),
    (["--slow-learner", "1:0.5"], 2, "--slow-learner '1:0.5': need RANK >= 0 and FACTOR >= 1"),
    (["--slow-learner", "5:3"], 2, "--slow-learner 5:3: there is no learner 5 among 2 "
                                   "(ranks 0..1)"),
    (["--slow-learner", "1:3"], 1, "--slow-learner 1:3: there is no learner 1 among 1"),
    (["--algo", "single"], 2, "--algo single trains one learner but the launcher started 2"),
    (["--avg-period", "0"], 1, "--avg-period must be positive, got 0"),
    (["--exchange-timeout", "0"], 1, "--exchange-timeout must be positive, got 0.0"),
    (["--hadpsgd-variant", "slow"], 1, "'slow' is not one of 'fixed', 'random', 'delay1'"),
])
def test_bad_strategy_options_give_one_clear_line(corpus, tmp_path, flags, world, message):
    """Refused before any rendezvous: a launcher's world of 2 is only its environment here."""
    data, targets = corpus
    env = _NO_LAUNCHER | ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                           "MASTER_PORT": "9"} if world == 2 else {})
    result = CliRunner().invoke(
        main, [str(a) for a in ("--data", data, "--targets", targets, "--out", tmp_path / "r",
                                *TINY, "--algo", "ssgd", *flags)], env=env)
    assert message in result.output
    if "is not one of" in message:  # click's own usage error
        assert result.exit_code == 2
    else:
        assert result.exit_code == 1
        assert result.output.startswith("Error: ") and len(result.output.splitlines()) == 1
    assert not (tmp_path / "r").exists()
