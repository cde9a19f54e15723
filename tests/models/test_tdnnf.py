"""TDNN-F: a layer is the hand formula, the semi-orthogonal step is Kaldi's (written out here in
numpy) and converges, the dropout schedule is Kaldi's, its context is its strides; it trains (one
learner and two real ones) and scores through final.pt; another model's options are ignored
with a warning and are not part of a run's identity."""

from __future__ import annotations

import logging

import kaldiio
import numpy as np
import pytest
import torch
from click.testing import CliRunner

from asrdist.cli.compute_loglikes import main as compute_loglikes
from asrdist.cli.train import main as train
from asrdist.models import tdnnf
from asrdist.models.build import ModelConfig, build_model
from asrdist.models.final import load_final
from asrdist.models.tdnnf import (
    BYPASS,
    TdnnfLayer,
    constrain_semi_orthogonal,
    dropout_proportion,
    strides,
)
from asrdist.testing import make_corpus
from asrdist.train.config import make_config
from asrdist.train.identity import run_options
from tests.parallel.cli_learners import TINY_MODEL, join_learners, start_learners

SMALL = ["--model=tdnnf", "--tdnnf-layers=5", "--tdnnf-dim=12", "--tdnnf-bottleneck=4",
         "--dropout=0.2"]


def test_a_layer_is_bypass_plus_relu_of_its_two_factors_over_t_minus_s_t_t_plus_s():
    torch.manual_seed(0)
    layer = TdnnfLayer(dim=3, bottleneck=2, stride=2).eval()  # batchnorm at mean 0, var 1
    x = torch.randn(1, 3, 9)
    m, b = layer.linear.weight.detach(), layer.affine.weight.detach()  # (2, 3, 2), (3, 2, 2)
    eps = layer.norm.eps
    expected = []
    for t in range(2, 7):  # each output frame has two input frames of context either side
        z_t = m[:, :, 0] @ x[0, :, t - 2] + m[:, :, 1] @ x[0, :, t]
        z_next = m[:, :, 0] @ x[0, :, t] + m[:, :, 1] @ x[0, :, t + 2]
        y = torch.relu(b[:, :, 0] @ z_t + b[:, :, 1] @ z_next + layer.affine.bias.detach())
        expected.append(BYPASS * x[0, :, t] + y / np.sqrt(1 + eps))
    torch.testing.assert_close(layer(x)[0], torch.stack(expected, dim=1), rtol=1e-5, atol=1e-6)


def _kaldi_step(m: np.ndarray) -> np.ndarray:
    """Povey et al. 2018, Sec. 2.3 (floating scale), with Kaldi's slow-down far from
    convergence: the expected output, from the paper's formulas."""
    p = m @ m.T
    alpha2 = np.trace(p @ p.T) / np.trace(p)
    ratio = np.trace(p @ p.T) * p.shape[0] / np.trace(p) ** 2
    speed = 0.125 * (0.5 if ratio > 1.02 else 1) * (0.5 if ratio > 1.1 else 1)
    return m - 4 * speed / alpha2 * (p - alpha2 * np.eye(len(p))) @ m


def test_the_semi_orthogonal_step_is_kaldis_and_repeated_it_gives_orthogonal_rows():
    rng = np.random.default_rng(0)
    near = np.linalg.qr(rng.standard_normal((6, 3)))[0].T * 1.7 + 0.01 * rng.standard_normal((3, 6))
    far = rng.standard_normal((3, 6))
    for start in (near, far):
        weight = torch.tensor(start, dtype=torch.float32)
        constrain_semi_orthogonal(weight)
        np.testing.assert_allclose(weight.numpy(), _kaldi_step(start), rtol=1e-5, atol=1e-6)
    weight = torch.tensor(far.T.copy().reshape(6, 3, 1))  # more rows than columns: columns
    for _ in range(60):
        constrain_semi_orthogonal(weight)
    m = weight.reshape(6, 3).T.double()
    p = m @ m.T
    torch.testing.assert_close(p, p[0, 0] * torch.eye(3, dtype=p.dtype), atol=1e-6, rtol=0)


def test_the_dropout_schedule_is_kaldis_0_0_at_20_peak_at_50_0_at_the_end():
    at = [0.0, 0.2, 0.35, 0.5, 0.75, 1.0]
    assert [round(dropout_proportion(0.4, p), 6) for p in at] == [0, 0, 0.2, 0.4, 0.2, 0]


def test_its_context_is_one_plus_its_strides_and_no_other_context_is_taken():
    assert strides(6) == [1, 1, 1, 0, 3, 3]
    model = build_model(ModelConfig(type="tdnnf", tdnnf_layers=6, tdnnf_dim=8,
                                    tdnnf_bottleneck=3), 5, 7).eval()
    assert (model.left_context, model.right_context) == (10, 10)
    assert model(torch.randn(2, 20 + 4, 5)).shape == (2, 4, 7)
    with pytest.raises(ValueError, match="context is its strides' \\(10\\)"):
        model(torch.randn(2, 24, 5), 3, 3)


def test_a_tdnnf_trains_and_its_final_pt_scores_every_utterance(tmp_path, monkeypatch):
    data, targets = make_corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    constrained = []
    monkeypatch.setattr(tdnnf, "constrain_semi_orthogonal",
                        lambda w: constrained.append(w.shape) or constrain_semi_orthogonal(w))
    trained = CliRunner().invoke(train, [
        "--data", str(data), "--targets", str(targets), "--out", str(out), *TINY_MODEL,
        *SMALL, "--epochs=3", "--lr=0.5"])
    assert trained.exit_code == 0, trained.output
    model, exported = load_final(out / "final.pt")
    assert exported.model_config.type == "tdnnf" and type(model).__name__ == "TDNNF"
    # every 4th step, on each factorised layer's bottleneck and the prefinal one
    assert exported.steps >= 8
    assert len(constrained) == exported.steps // 4 * (5 + 1)
    scored = CliRunner().invoke(compute_loglikes, [
        "--model", str(out / "final.pt"), "--data", str(data), "--out", str(tmp_path / "ll")])
    assert scored.exit_code == 0, scored.output
    feats = dict(kaldiio.load_scp(str(data / "feats.scp")))
    loglikes = dict(kaldiio.load_scp(str(tmp_path / "ll" / "loglikes.scp")))
    assert loglikes.keys() == feats.keys()
    assert all(loglikes[u].shape == (len(feats[u]), exported.num_pdfs) for u in feats)
    assert all(np.isfinite(v).all() for v in loglikes.values())


@pytest.mark.parametrize("algo", ["ssgd", "adpsgd-random"])
def test_two_learner_processes_train_a_tdnnf(tmp_path, algo):
    corpus = make_corpus(tmp_path / "corpus", num_utts=16)
    out = tmp_path / "run"
    procs = start_learners(corpus, out, algo, *TINY_MODEL, *SMALL, "--epochs=2",
                           "--exchange-timeout=20")
    assert join_learners(procs, out, limit=120) == [0, 0]
    model, exported = load_final(out / "final.pt")
    assert type(model).__name__ == "TDNNF" and exported.world_size == 2


TDNNF_OPTIONS = ("tdnnf_layers", "tdnnf_dim", "tdnnf_bottleneck")


def test_a_model_s_own_options_count_for_that_model_only():
    given = {"data": "d", "targets": "t", "out": "o"}
    blstm = run_options(make_config(None, {**given, "tdnnf_dim": 64}), 1)
    assert not set(TDNNF_OPTIONS) & set(blstm)
    assert blstm == run_options(make_config(None, given), 1)  # ignored, as before TDNN-F
    tdnnf = run_options(make_config(None, {**given, "model": "tdnnf"}), 1)
    assert set(TDNNF_OPTIONS) <= set(tdnnf) and "conformer_blocks" not in tdnnf


def test_another_model_s_option_given_is_ignored_with_a_warning(tmp_path, caplog):
    data, targets = make_corpus(tmp_path / "corpus")
    with caplog.at_level(logging.WARNING):
        trained = CliRunner().invoke(train, [
            "--data", str(data), "--targets", str(targets), "--out", str(tmp_path / "run"),
            *TINY_MODEL, "--epochs=1", "--tdnnf-dim=64", "--conv-kernel=7"])
    assert trained.exit_code == 0, trained.output
    assert "this run does not use --conv-kernel 7, --tdnnf-dim 64 (another model's, " \
        "optimizer's or objective's): ignored" in caplog.text
