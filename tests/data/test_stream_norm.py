"""Each stream of joined features normalised as its layout says, in training's reader: fbank
per speaker, fMLLR and i-vectors not at all (nnet3 applies no CMVN to i-vectors: a speaker's
mean i-vector is the speaker information it is there to carry)."""

from __future__ import annotations

import kaldiio
import numpy as np
import pytest

from asrdist.data.dataset import UtteranceReader, load_corpus
from asrdist.data.join import Stream, join_features
from asrdist.errors import AsrdistError

# Two speakers: A (two utterances), B (one). fbank 1-dim, fMLLR 1-dim, i-vectors 2-dim one row
# every 10 frames.
FBANK = {"A-1": [[1], [3]], "A-2": [[5], [7]], "B-1": [[10], [20], [30]]}
FMLLR = {"A-1": [[2], [2]], "A-2": [[4], [4]], "B-1": [[6], [6], [6]]}
IVECTOR = {"A-1": [[0.5, -1]], "A-2": [[1.5, 1]], "B-1": [[9, 9]]}


def _write(path, mats):
    kaldiio.save_ark(f"{path}.ark", {u: np.asarray(m, dtype=np.float32) for u, m in mats.items()},
                     scp=f"{path}.scp")
    return f"{path}.scp"


def make_joined(root, fbank=FBANK, delta_order=0, streams=True, src_norm="spk"):
    """Features joined by asrdist-join-feats, and ingested targets (all pdf 0)."""
    src, targets = root / "fbank", root / "targets"
    src.mkdir()
    targets.mkdir()
    _write(src / "feats", fbank)
    (src / "utt2spk").write_text("".join(f"{u} {u[0]}\n" for u in fbank))
    extra = [Stream.parse(_write(root / "fmllr", FMLLR)),
             Stream.parse(_write(root / "ivector", IVECTOR) + ":10")] if streams else []
    join_features(src, root / "joined", extra, delta_order=delta_order, src_norm=src_norm)
    _write(targets / "pdf", {u: np.zeros(len(m), dtype=np.int32) for u, m in fbank.items()})
    (targets / "num_pdfs").write_text("1\n")
    return root / "joined", targets


# By hand: speaker A's fbank mean is (1+3+5+7)/4 = 4, B's (10+20+30)/3 = 20; fMLLR and the
# i-vectors as they were joined (each i-vector row repeated over its 10 frames).
EXPECTED = {
    "A-1": [[-3, 2, 0.5, -1], [-1, 2, 0.5, -1]],
    "A-2": [[1, 4, 1.5, 1], [3, 4, 1.5, 1]],
    "B-1": [[-10, 6, 9, 9], [0, 6, 9, 9], [10, 6, 9, 9]],
}


def test_ivector_and_fmllr_columns_reach_the_network_unnormalised(tmp_path):
    corpus = load_corpus(*make_joined(tmp_path))
    reader = UtteranceReader(corpus, "spk", False, 4)
    for i, utt in enumerate(corpus.utts):
        np.testing.assert_allclose(reader.read(i)[0], EXPECTED[utt], atol=1e-6)


def test_per_utterance_normalisation_of_the_fbank_stream(tmp_path):
    corpus = load_corpus(*make_joined(tmp_path, src_norm="utt"))
    feats = UtteranceReader(corpus, "spk", False, 4).read(corpus.utts.index("A-2"))[0]
    np.testing.assert_allclose(feats, [[-1, 4, 1.5, 1], [1, 4, 1.5, 1]], atol=1e-6)  # mean 6


@pytest.mark.parametrize("norm_vars", [False, True])
def test_deltas_normalised_as_apply_cmvn_then_add_deltas(tmp_path, norm_vars):
    """One speaker, the ramp 0 1 2 3 (its deltas 0.5 0.8 0.8 0.5 and delta-deltas 0.22 0.09
    -0.09 -0.22, worked in test_join). Kaldi's `apply-cmvn | add-deltas`: the mean 1.5 comes
    off the statics; deltas of a constant are zero, so they stay; with --norm-vars every block
    is divided by the statics' standard deviation, sqrt((0+1+4+9)/4 - 1.5^2) = sqrt(1.25)."""
    corpus = load_corpus(*make_joined(tmp_path, {"A-1": [[0], [1], [2], [3]]}, 2, False))
    feats = UtteranceReader(corpus, "spk", norm_vars, 3).read(0)[0]
    expected = np.array([[-1.5, 0.5, 0.22], [-0.5, 0.8, 0.09], [0.5, 0.8, -0.09],
                         [1.5, 0.5, -0.22]])
    if norm_vars:
        expected /= np.sqrt(1.25)
    np.testing.assert_allclose(feats, expected, atol=1e-6)


def test_another_cmvn_than_the_layouts_is_refused(tmp_path):
    corpus = load_corpus(*make_joined(tmp_path))
    with pytest.raises(AsrdistError, match="--cmvn utt: the --data dir's feats_layout sets each "
                                           "column range's normalisation"):
        UtteranceReader(corpus, "utt", False, 4)


def test_a_matrix_wider_than_the_layout_names_the_utterance(tmp_path):
    data, targets = make_joined(tmp_path)
    layout = data / "feats_layout"
    layout.write_text(layout.read_text().replace("2 4 none 0", "2 3 none 0"))
    reader = UtteranceReader(load_corpus(data, targets), "spk", False, None)
    with pytest.raises(AsrdistError, match="utterance A-1, speaker A: 4 feature columns, the "
                                           "layout has 3"):
        reader.read(0)
