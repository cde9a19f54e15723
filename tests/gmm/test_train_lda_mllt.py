"""LDA+MLLT triphones (train_lda_mllt.sh) on the coarticulated synthetic corpus: the exp dir
carries final.mat and splice_opts, its features are what decoding applies, and the system
fits the data at least as well as deltas per dimension spent."""

from __future__ import annotations

import kaldi_hmm_gmm as khg  # noqa: F401, I001  (before anything loading kaldifst)
import kaldiio
import numpy as np
import pytest

from asrdist.gmm.train_lda_mllt import LdaMlltOptions, train_lda_mllt
from asrdist.gmm.train_mono import MonoOptions, train_mono
from asrdist.hmm.ali_dir import read_ali_dir
from asrdist.hmm.tree import read_tree
from asrdist.kaldi.gmm_feats import FeatureTransform
from asrdist.stage import Skipped
from tests.gmm.synth_corpus import make_corpus

OPTS = LdaMlltOptions(nj=2, num_leaves=40, total_gauss=160, num_iters=10, max_iter_inc=7,
                      realign_iters=(4, 8), split_thresh=20.0, dim=12, mllt_iters=(2, 4))


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    root = tmp_path_factory.mktemp("tri2")
    corpus = make_corpus(root, num_utts=40, coarticulation=3.0)
    train_mono(corpus.data, corpus.lang, root / "mono",
               MonoOptions(nj=2, num_iters=10, total_gauss=160))
    summary = train_lda_mllt(corpus.data, corpus.lang, root / "mono", root / "tri2", OPTS)
    return corpus, root, summary


def test_exp_dir_holds_the_transform_that_decoding_applies(system):
    corpus, root, summary = system
    assert summary.aligned == 40 and not summary.failed
    tri2 = root / "tri2"
    mat = kaldiio.load_mat(str(tri2 / "final.mat"))
    assert mat.shape == (12, 13 * 7)  # 7 spliced 13-dim frames; below the 19 mono pdfs
    assert (tri2 / "splice_opts").read_text().strip() == "--left-context=3 --right-context=3"
    transform = FeatureTransform.of_model_dir(tri2)
    assert np.array_equal(transform.matrix, mat) and (transform.left, transform.right) == (3, 3)
    # MLLT composed in: the final matrix is not the LDA one it started from
    assert not np.allclose(mat, kaldiio.load_mat(str(tri2 / "0.mat")))
    assert read_tree(tri2 / "tree").context_width == 3
    assert set(read_ali_dir(tri2)) == set(read_ali_dir(root / "mono"))
    likes = [r.log_like_per_frame for r in summary.iters]
    assert likes[-1] > likes[0]


def test_mllt_passes_are_logged_and_a_rerun_skips(system):
    corpus, root, _ = system
    log = (root / "tri2" / "log" / "train_lda_mllt.log").read_text()
    assert "LDA: 12 x 91" in log
    assert log.count("MLLT gains") == 2
    assert isinstance(train_lda_mllt(corpus.data, corpus.lang, root / "mono", root / "tri2",
                                     OPTS), Skipped)
