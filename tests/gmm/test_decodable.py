"""gmm-boost-silence: the optional-silence pdfs score log(boost) higher, in a copy."""

from __future__ import annotations

import kaldi_hmm_gmm as khg  # before kaldifst
import numpy as np
import pytest

from asrdist.gmm.decodable import boost_silence
from asrdist.gmm.model import init_mono
from asrdist.kaldi.lang import Lang
from tests.gmm.synth_corpus import make_corpus


def test_boost_silence_scales_only_the_silence_pdfs_of_a_copy(tmp_path) -> None:
    corpus = make_corpus(tmp_path, num_utts=1)
    lang = Lang.load(corpus.lang)
    rng = np.random.default_rng(0)
    model = init_mono(lang.topology(), lang.phone_sets, [rng.normal(size=(50, 13))])
    sil = [int(x) for x in (corpus.lang / "phones/optional_silence.int").read_text().split()]
    boosted = boost_silence(model.am, model.trans_model, sil, 1.25)
    ok, sil_pdfs = khg.get_pdfs_for_phones(model.trans_model, sil)
    assert ok and sil_pdfs
    x = rng.normal(size=13).astype(np.float32)
    for pdf in range(model.am.num_pdfs):
        gain = boosted.log_likelihood(pdf, x) - model.am.log_likelihood(pdf, x)
        assert gain == pytest.approx(np.log(1.25) if pdf in sil_pdfs else 0.0, abs=1e-4)

