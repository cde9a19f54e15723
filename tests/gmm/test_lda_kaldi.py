"""LDA against Kaldi's own acc-lda and est-lda on the same alignments and spliced frames
(tests/gmm/kaldi_convert/make_expected.sh): the same directions, each up to its sign (Kaldi's
comes from its SVD)."""

from __future__ import annotations

from pathlib import Path

import kaldi_hmm_gmm as khg  # noqa: F401, I001  (before anything loading kaldifst)
import kaldiio
import numpy as np

from asrdist.gmm.lda import LdaStats
from asrdist.kaldi.alignments import read_alignments
from asrdist.kaldi.transition_model import read_transition_model

CASE = Path(__file__).parent / "kaldi_convert"


def test_lda_equals_kaldis_est_lda_up_to_row_signs():
    info = read_transition_model(CASE / "mono.mdl")
    alis = dict(read_alignments(CASE / "mono_ali.1.gz"))
    feats = dict(kaldiio.load_ark(str(CASE / "spliced.ark")))
    stats = LdaStats.zeros(info.num_pdfs, 18)
    for utt, ali in alis.items():
        nonsilence = ~np.isin(info.tid_to_phone[ali], [1, 2])  # weight-silence-post 0.0 1:2
        stats.accumulate(feats[utt], info.tid_to_pdf[ali], nonsilence.astype(float))
    assert stats.occ.sum() == 1083  # est-lda.log: "Data count is 1083"
    ours = stats.estimate(dim=6).matrix
    kaldi = kaldiio.load_mat(str(CASE / "lda.mat"))
    assert ours.shape == kaldi.shape == (6, 18)
    signs = np.sign((ours * kaldi).sum(axis=1))
    assert np.allclose(ours * signs[:, None], kaldi, rtol=1e-3, atol=1e-4)
