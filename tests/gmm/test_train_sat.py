"""Speaker-adapted training (train_sat.sh) on a synthetic corpus whose speakers scale each
feature dimension differently: the transforms must undo the scaling, and the adapted system
must be a Kaldi alignment dir as the others."""

from __future__ import annotations

import kaldi_hmm_gmm as khg  # noqa: F401, I001  (before anything loading kaldifst)
import numpy as np
import pytest

from asrdist.gmm.train_deltas import DeltasOptions, train_deltas
from asrdist.gmm.train_mono import MonoOptions, train_mono
from asrdist.gmm.train_sat import SatOptions, train_sat
from asrdist.hmm.ali_dir import read_ali_dir
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.final_mdl import read_final_mdl
from asrdist.kaldi.gmm_feats import (
    GMM_TABLES,
    FeatureTransform,
    load_features,
    read_speaker_transforms,
)
from asrdist.stage import Skipped
from tests.gmm.synth_corpus import make_corpus

SIZES = {"nj": 2, "num_leaves": 30, "total_gauss": 90, "num_iters": 8, "max_iter_inc": 6,
         "realign_iters": (4,), "split_thresh": 20.0}


@pytest.fixture(scope="module")
def systems(tmp_path_factory):
    root = tmp_path_factory.mktemp("sat")
    corpus = make_corpus(root, num_utts=36, coarticulation=3.0, speaker_scale=0.4)
    train_mono(corpus.data, corpus.lang, root / "mono",
               MonoOptions(nj=2, num_iters=10, total_gauss=90))
    train_deltas(corpus.data, corpus.lang, root / "mono", root / "tri1", DeltasOptions(**SIZES))
    sat = train_sat(corpus.data, corpus.lang, root / "tri1", root / "tri3",
                    SatOptions(**SIZES, fmllr_iters=(2, 5)))
    return corpus, root, sat


def test_the_transforms_make_the_speakers_alike(systems):
    """Each speaker scales its dimensions its own way; CMN leaves that, fMLLR undoes it: the
    speakers' per-dimension spreads differ far less after their transforms than before."""
    corpus, root, sat = systems
    assert sat.aligned == 36 and not sat.failed
    trans = read_speaker_transforms(root / "tri3" / "trans.ark")
    assert sorted(trans) == ["spk0", "spk1", "spk2"]
    data = DataDir.load(corpus.data, GMM_TABLES)
    plain = load_features(data, data.utts)
    adapted = load_features(data, data.utts, FeatureTransform().with_speakers(trans))

    def disagreement(feats: dict[str, np.ndarray]) -> float:
        spreads = np.array([np.concatenate([f for u, f in feats.items()
                                            if data.speaker(u) == s])[:, :13].std(axis=0)
                            for s in sorted(trans)])
        return float(np.log(spreads.max(axis=0) / spreads.min(axis=0)).mean())

    assert disagreement(adapted) < 0.5 * disagreement(plain)


def test_it_is_an_alignment_dir_and_a_rerun_skips(systems):
    corpus, root, _ = systems
    assert set(read_ali_dir(root / "tri3")) == set(read_ali_dir(root / "tri1"))
    assert (root / "tri3" / "tree").is_file() and not (root / "tri3" / "final.mat").exists()
    assert (root / "tri3" / "final.alimdl").is_file()
    again = train_sat(corpus.data, corpus.lang, root / "tri1", root / "tri3",
                      SatOptions(**SIZES, fmllr_iters=(2, 5)))
    assert isinstance(again, Skipped)


def _gaussian_posteriors(means: np.ndarray, variances: np.ndarray, weights: np.ndarray,
                         x: np.ndarray) -> np.ndarray:
    """w_g N(x; mu_g, var_g), normalised over g, frames by Gaussians (by hand)."""
    log_n = -0.5 * (np.log(2 * np.pi * variances).sum(axis=1)[None, :]
                    + (((x[:, None, :] - means[None]) ** 2) / variances[None]).sum(axis=2))
    log_p = np.log(weights)[None, :] + log_n
    p = np.exp(log_p - log_p.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def test_the_alignment_model_is_the_final_one_reestimated_on_unadapted_features(systems):
    """final.alimdl (train_sat.sh's): each Gaussian's mean is the mean of the unadapted
    features of its frames, weighted by the adapted model's posteriors on the adapted
    features (gmm-acc-stats-twofeats); a Gaussian with under 10 frames keeps its mean."""
    corpus, root, _ = systems
    info, final = read_final_mdl(root / "tri3" / "final.mdl")
    ali_info, alimdl = read_final_mdl(root / "tri3" / "final.alimdl")
    assert ali_info.tuples == info.tuples  # same tree and transitions: the same graph decodes
    data = DataDir.load(corpus.data, GMM_TABLES)
    trans = read_speaker_transforms(root / "tri3" / "trans.ark")
    alis = read_ali_dir(root / "tri3")
    utts = sorted(alis)
    si = load_features(data, utts)
    adapted = load_features(data, utts, FeatureTransform().with_speakers(trans))
    pdfs = np.concatenate([info.tid_to_pdf[alis[u]] for u in utts])
    x_si = np.concatenate([si[u] for u in utts]).astype(np.float64)
    x_ad = np.concatenate([adapted[u] for u in utts]).astype(np.float64)
    checked = 0
    for pdf, gmm in enumerate(final.pdfs):
        rows = pdfs == pdf
        post = _gaussian_posteriors(gmm.means.astype(np.float64),
                                    gmm.variances.astype(np.float64),
                                    gmm.weights.astype(np.float64), x_ad[rows])
        occ = post.sum(axis=0)
        for g in range(len(occ)):
            want = post[:, g] @ x_si[rows] / occ[g] if occ[g] >= 10 else gmm.means[g]
            np.testing.assert_allclose(alimdl.pdfs[pdf].means[g], want, rtol=1e-3, atol=1e-3)
            checked += occ[g] >= 10
    assert checked > 20
    assert not np.allclose(alimdl.pdfs[0].means, final.pdfs[0].means, atol=1e-2)
