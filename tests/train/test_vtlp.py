"""VTLP on MFCC training chunks: a cepstral matrix per warp factor, checked against the cepstra
of a vowel whose formants really move."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from asrdist.data.features import FeatureOptions, compute_features, make_extractor
from asrdist.errors import AsrdistError
from asrdist.parallel.strategy import Single
from asrdist.testing import make_corpus
from asrdist.train.trainer import train
from asrdist.train.vtlp import cepstral_warp, make_vtlp, read_mfcc_config
from tests.train.corpus import train_config, train_losses

SAMPLE_RATE = 16000
FORMANTS = ((500.0, 80.0), (1500.0, 100.0), (2500.0, 120.0), (3500.0, 150.0))


def _mfcc_config() -> dict:
    return make_extractor(FeatureOptions(kind="mfcc")).config.to_dict()


def _vowel(scale: float) -> np.ndarray:
    """A quarter second of a pulse train through two-pole resonators at FORMANTS, pitch and
    formants multiplied by ``scale``: the spectrum of a vocal tract ``scale`` times shorter."""
    x = np.zeros(SAMPLE_RATE // 4)
    x[:: int(SAMPLE_RATE / (120.0 * scale))] = 1.0
    for freq, bandwidth in FORMANTS:
        r = np.exp(-np.pi * bandwidth * scale / SAMPLE_RATE)
        a1, a2 = 2 * r * np.cos(2 * np.pi * freq * scale / SAMPLE_RATE), -r * r
        y = np.zeros(len(x) + 2)  # two zeros of history first
        for n, sample in enumerate(x):
            y[n + 2] = (1 - r) * sample + a1 * y[n + 1] + a2 * y[n]
        x = y[2:]
    return x / np.abs(x).max() * 8000.0


def _mean_cepstra(scale: float) -> np.ndarray:
    extractor = make_extractor(FeatureOptions(kind="mfcc"))
    return compute_features(_vowel(scale), extractor, SAMPLE_RATE).mean(0).astype(np.float64)


def test_no_warp_is_the_identity():
    np.testing.assert_allclose(cepstral_warp(1.0, _mfcc_config()), np.eye(13), atol=1e-12)
    config = {**_mfcc_config(), "high_freq": 7000.0, "num_ceps": 20, "num_filters": 30}
    np.testing.assert_allclose(cepstral_warp(1.0, config), np.eye(20), atol=1e-12)


@pytest.mark.parametrize("alpha", [0.9, 1.1])
def test_the_warp_predicts_the_cepstra_of_a_vowel_with_scaled_formants(alpha):
    original, moved = _mean_cepstra(1.0), _mean_cepstra(alpha)
    predicted = cepstral_warp(alpha, _mfcc_config()) @ original
    backwards = cepstral_warp(1.0 / alpha, _mfcc_config()) @ original
    unwarped_error = np.linalg.norm(original - moved)
    assert np.linalg.norm(predicted - moved) < 0.5 * unwarped_error
    assert np.linalg.norm(backwards - moved) > unwarped_error


def test_warped_batches_keep_their_shape_differ_per_chunk_and_are_seeded():
    vtlp = make_vtlp(0.1, _mfcc_config())
    x = torch.randn(1, 41, 13).expand(64, 41, 13).contiguous()
    torch.manual_seed(3)
    y = vtlp(x)
    torch.manual_seed(3)
    assert torch.equal(vtlp(x), y)
    assert y.shape == x.shape
    assert len({tuple(chunk[0].tolist()) for chunk in y}) > 10


def test_vtlp_refuses_input_that_is_not_its_mfcc(tmp_path):
    with pytest.raises(AsrdistError, match="feats_config.json.*missing"):
        read_mfcc_config(tmp_path, 13)
    fbank = make_extractor(FeatureOptions(kind="fbank")).config.to_dict()
    (tmp_path / "feats_config.json").write_text(json.dumps(fbank))
    with pytest.raises(AsrdistError, match="describes other features"):
        read_mfcc_config(tmp_path, 40)
    (tmp_path / "feats_config.json").write_text(json.dumps(_mfcc_config()))
    with pytest.raises(AsrdistError, match="13 cepstra, the input has 40"):
        read_mfcc_config(tmp_path, 40)
    assert read_mfcc_config(tmp_path, 13)["num_ceps"] == 13


@pytest.mark.parametrize("warp", [-0.1, 0.5])
def test_a_bad_warp_range_is_refused_naming_the_flag(warp, tmp_path):
    with pytest.raises(AsrdistError, match="--vtlp-warp"):
        train_config((tmp_path / "d", tmp_path / "t"), tmp_path / "o", {}, vtlp_warp=warp)


def test_training_with_vtlp_is_seeded_and_differs_from_training_without(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    base = dict(layers=1, units=16, chunk_len=10, batch_size=8, shuffle_buffer=32,
                heldout_utts=2, log_every=1, lr=0.5, lr_ref_batch=8, epochs=2)
    for name, warp in (("a", 0.1), ("b", 0.1), ("plain", 0.0)):
        train(train_config(corpus, tmp_path / name, base, vtlp_warp=warp), Single())
    losses = {name: train_losses(tmp_path / name / "metrics.jsonl") for name in ("a", "b", "plain")}
    assert losses["a"] == losses["b"]
    assert losses["a"] != losses["plain"]
