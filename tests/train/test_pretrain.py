"""RBM pretraining: it learns, its stack initialises the sigmoid DNN exactly, and a DNN so
initialised trains; several learners average their RBMs, and one lost ends the job, named."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from click.testing import CliRunner

from asrdist.cli.pretrain_rbm import main as pretrain_cli
from asrdist.errors import AsrdistError
from asrdist.models.dbn import init_dnn_from_dbn, load_dbn
from asrdist.models.dnn import DNN
from asrdist.options import make
from asrdist.parallel.launch.rendezvous import free_port
from asrdist.parallel.strategy import Single
from asrdist.stage import Skipped
from asrdist.testing import make_corpus
from asrdist.train.config import make_config
from asrdist.train.metrics import read_metrics
from asrdist.train.pretrain import PretrainConfig, pretrain
from asrdist.train.trainer import train
from tests.parallel.cli_learners import fork_learners

SMALL = dict(splice=2, hidden_layers=2, hidden_units=12, batch_size=4, chunk_len=8,
             shuffle_buffer=64, epochs=3, lr=0.1, lr_gaussian=0.01)


def _config(data, targets, out, **more) -> PretrainConfig:
    """SMALL's pretraining of ``data`` into ``out``, options by flag name (--splice too)."""
    return make(PretrainConfig, {"data": str(data), "targets": str(targets), "out": str(out),
                                 **SMALL, **more})


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def dbn(corpus, tmp_path_factory):
    data, targets = corpus
    out = tmp_path_factory.mktemp("dbn")
    return pretrain(_config(data, targets, out))


def _records(path):
    return [r for r in read_metrics(path.parent / "pretrain.jsonl")]


def test_each_rbm_reconstructs_better_pass_by_pass(dbn):
    records = _records(dbn)
    assert [(r["layer"], r["pass"]) for r in records] == [(1, p) for p in range(1, 7)] + [
        (2, p) for p in range(1, 4)]
    for layer in (1, 2):
        mse = [r["recon_mse"] for r in records if r["layer"] == layer]
        assert mse[-1] < mse[0]
    record = load_dbn(dbn)
    assert record["layers"][0]["gaussian"] and not record["layers"][1]["gaussian"]
    assert record["layers"][0]["weight"].shape == (12, 5 * 13)


def test_the_stack_initialises_the_dnn_with_the_normalisation_folded_in(dbn):
    record = load_dbn(dbn)
    dnn = DNN(13, 5, splice=2, hidden_layers=3, hidden_units=12, activation="sigmoid")
    assert init_dnn_from_dbn(dnn, record, str(dbn)) == 2
    x = torch.randn(3, 9, 13)
    spliced = x.unfold(1, 5, 1).transpose(2, 3).flatten(2)
    v = (spliced - record["mean"]) / record["std"]
    first = torch.sigmoid(v @ record["layers"][0]["weight"].T
                          + record["layers"][0]["hidden_bias"])
    second = torch.sigmoid(first @ record["layers"][1]["weight"].T
                           + record["layers"][1]["hidden_bias"])
    torch.testing.assert_close(dnn.net[:4](spliced), second, rtol=1e-5, atol=1e-5)
    relu = DNN(13, 5, splice=2, hidden_layers=3, hidden_units=12)
    with pytest.raises(AsrdistError, match="--activation sigmoid"):
        init_dnn_from_dbn(relu, record, str(dbn))
    wide = DNN(13, 5, splice=2, hidden_layers=3, hidden_units=16, activation="sigmoid")
    with pytest.raises(AsrdistError, match="match --hidden-units"):
        init_dnn_from_dbn(wide, record, str(dbn))


def test_asrdist_train_init_dbn_trains_the_pretrained_dnn(corpus, dbn, tmp_path):
    data, targets = corpus
    options = {"data": str(data), "targets": str(targets), "model": "dnn", "splice": 2,
               "hidden_layers": 2, "hidden_units": 12, "chunk_len": 8, "batch_size": 4,
               "shuffle_buffer": 32, "heldout_utts": 2, "log_every": 1, "lr": 0.5,
               "lr_ref_batch": 4, "epochs": 3, "activation": "sigmoid"}
    result = train(make_config(None, {**options, "out": str(tmp_path / "rbm"),
                                      "init_dbn": str(dbn)}), Single())
    assert result.heldout["heldout_ce"] < 1.2
    with pytest.raises(AsrdistError, match="--init-dbn initialises a sigmoid DNN"):
        make_config(None, {**options, "activation": "relu", "out": "x", "init_dbn": "y"})


def test_cli_refuses_a_bad_option_by_name(corpus, tmp_path):
    data, targets = corpus
    result = CliRunner().invoke(pretrain_cli, ["--data", str(data), "--targets", str(targets),
                                               "--out", str(tmp_path), "--momentum", "0.95"])
    assert result.exit_code == 1
    assert "--momentum and --momentum-high" in result.output


def test_two_learners_average_their_rbms(corpus, dbn, tmp_path):
    data, targets = corpus
    port = free_port()
    args = [f"--{k.replace('_', '-')}={v}" for k, v in {**SMALL, "epochs": 1}.items()]
    cmd = [sys.executable, "-m", "asrdist.cli.pretrain_rbm", f"--data={data}",
           f"--targets={targets}", f"--out={tmp_path / 'two'}", "--avg-period=2", *args]
    procs = [subprocess.Popen(cmd, env={**os.environ, "RANK": str(r), "WORLD_SIZE": "2",
                                        "LOCAL_RANK": str(r), "MASTER_ADDR": "127.0.0.1",
                                        "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"},
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    sums = [[line.split("parameter sum ")[1] for line in e.splitlines() if "done: param" in line]
            for e in errors]
    assert len(sums[0]) == 2 and sums[0] == sums[1]  # both learners end with the same RBMs
    two = _records(tmp_path / "two" / "dbn.pt")
    alone = _records(dbn)
    assert two[0]["steps"] == pytest.approx(alone[0]["steps"] / 2, abs=2)  # shards: half each


def _pretrain_learner(args: list[str]) -> None:
    """A forked learner: its log lines go to its own stderr, not to pytest's capture."""
    logging.root.handlers.clear()
    pretrain_cli(args)


def test_a_lost_pretraining_learner_is_named_as_a_training_learner_is(corpus, tmp_path):
    data, targets = corpus
    logs = tmp_path / "logs"
    args = [f"--{k.replace('_', '-')}={v}" for k, v in {**SMALL, "epochs": 1000}.items()]
    procs = fork_learners(_pretrain_learner, [f"--data={data}", f"--targets={targets}",
                                              f"--out={tmp_path / 'run'}",
                                              "--exchange-timeout=6", *args], logs)
    try:
        deadline = time.monotonic() + 60
        while "RBM 1 pass 1:" not in (logs / "err0.txt").read_text():
            assert time.monotonic() < deadline and all(p.exitcode is None for p in procs), \
                (logs / "err0.txt").read_text()[-2000:]
            time.sleep(0.05)
        os.kill(procs[1].pid, signal.SIGKILL)
        t0 = time.monotonic()
        procs[0].join(30)
        seconds = time.monotonic() - t0
    finally:
        for p in procs:
            p.kill()
    err = (logs / "err0.txt").read_text()
    assert procs[0].exitcode == 1 and seconds < 6 + 6, (seconds, err[-2000:])
    named = [line for line in err.splitlines() if line.startswith("asrdist: learner 0: ")]
    assert named and ("learner 1" in named[0] or "[1]" in named[0]), err[-2000:]
    assert "Traceback" not in err


def test_a_done_pretraining_is_skipped_and_the_cli_prints_no_path(corpus, dbn, caplog):
    data, targets = corpus
    out = dbn.parent
    before = dbn.stat().st_mtime_ns
    assert pretrain(_config(data, targets, out)) == \
        Skipped(out, "pretrain")
    assert dbn.stat().st_mtime_ns == before
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in SMALL.items()]
    with caplog.at_level(logging.INFO):
        result = CliRunner().invoke(pretrain_cli, [f"--data={data}", f"--targets={targets}",
                                                   f"--out={out}", *flags])
    assert result.exit_code == 0, result.output
    assert str(dbn) not in result.output
    assert any("pretrain already done with these options and inputs; skipping" in m
               for m in caplog.messages)


def test_the_config_holds_the_dnn_s_model_options_as_asrdist_train_declares_them(tmp_path):
    """The three options that shape the stack are the model's (ModelConfig's declarations,
    defaults and checks), on a sigmoid DNN; the run's identity keeps the names it had."""
    from asrdist.models.build import ModelConfig
    from asrdist.options import declared, fingerprint

    cfg = _config("d", "t", tmp_path)
    assert cfg.net == ModelConfig(type="dnn", activation="sigmoid", splice=2, hidden_layers=2,
                                  hidden_units=12)
    model = declared(ModelConfig)
    for name in ("splice", "hidden_layers", "hidden_units"):
        assert declared(PretrainConfig)[name] is model[name]
    assert "model" not in declared(PretrainConfig) and "layers" not in declared(PretrainConfig)
    assert {"splice": 2, "hidden_layers": 2, "hidden_units": 12}.items() <= \
        fingerprint(cfg).items()
    with pytest.raises(AsrdistError, match="--hidden-layers must be positive"):
        _config("d", "t", tmp_path, hidden_layers=0)
