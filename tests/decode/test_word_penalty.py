"""Word insertion penalties on one graph: by hand on a two-path graph, and against HCLG
composed with a one-state word loop (what lattice-add-penalty does to every word's cost)."""

from __future__ import annotations

from types import SimpleNamespace

import kaldi_hmm_gmm  # noqa: F401  (before kaldifst, or the process hangs)
import kaldifst
import numpy as np
import pytest

from asrdist.decode.decoder import DecodeOptions, Decoder
from asrdist.decode.word_penalty import PenaltyGraph
from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import read_symbols

X, Y, Z = 1, 2, 3  # word ids of the hand-built graph


def _two_paths(tmp_path, extra_olabel: int | None = None):
    """Two frames, transition-ids 1 then 2 either way: 'x y' (graph cost 0) or 'z' (cost 1).

    With penalty p, 'x y' costs 2p and 'z' 1 + p: 'x y' is best while p < 1.
    """
    fst = kaldifst.StdVectorFst()
    for _ in range(4):
        fst.add_state()
    fst.start = 0
    fst.add_arc(0, kaldifst.StdArc(1, X, 0.0, 1))
    fst.add_arc(1, kaldifst.StdArc(2, Y, 0.0, 3))
    fst.add_arc(0, kaldifst.StdArc(1, Z, 1.0, 2))
    fst.add_arc(2, kaldifst.StdArc(2, extra_olabel or 0, 0.0, 3))
    fst.set_final(3, 0.0)
    path = tmp_path / "HCLG.fst"
    fst.write(str(path))
    return path


def _decode(graph, trans, scores, acwt=1.0):
    return Decoder(graph, trans, DecodeOptions(acwt=acwt)).decode(scores)


def _decode_penalised(graphs, penalty, scores, acwt=1.0):
    """What decode_dir does with a PenaltyGraph: its graph and scores, labels mapped back."""
    graphs.set_penalty(penalty)
    hyp = _decode(graphs.fst, graphs.trans, graphs.scores(scores, acwt), acwt)
    hyp.alignment = graphs.alignment(hyp.alignment)
    return hyp


@pytest.mark.parametrize("penalty,words,cost", [
    (0.0, [X, Y], 0.75), (0.5, [X, Y], 1.75), (-1.0, [X, Y], -1.25), (1.5, [Z], 3.25)])
def test_penalty_by_hand_on_a_two_path_graph(tmp_path, penalty, words, cost):
    trans = SimpleNamespace(tid_to_pdf=np.array([-1, 0, 1]), num_pdfs=2)  # tid t -> pdf t-1
    scores = np.array([[-0.5, -9.0], [-9.0, -0.25]], dtype=np.float32)  # acoustic cost 0.75
    graphs = PenaltyGraph(_two_paths(tmp_path), [X, Y, Z], trans)
    for other in (2.0, 0.0):
        _decode_penalised(graphs, other, scores)
    hyp = _decode_penalised(graphs, penalty, scores)
    assert hyp.words == words
    assert hyp.alignment == [1, 2]
    assert hyp.cost == cost


def test_word_arc_without_input_takes_the_penalty_on_its_cost(tmp_path):
    """'x y' (cost 2p, 'x' on an input-epsilon arc) or 'z' (1 + p): the penalty is written
    on the cost of 'x', and taken off again."""
    fst = kaldifst.compile("0\t1\t0\t1\t0.0\n1\t2\t1\t2\t0.0\n0\t2\t1\t3\t1.0\n2\t0.0\n")
    fst.write(str(tmp_path / "HCLG.fst"))
    trans = SimpleNamespace(tid_to_pdf=np.array([-1, 0]), num_pdfs=1)
    graphs = PenaltyGraph(tmp_path / "HCLG.fst", [X, Y, Z], trans)
    scores = np.zeros((1, 1), dtype=np.float32)
    assert _decode_penalised(graphs, 0.0, scores).words == [X, Y]
    assert _decode_penalised(graphs, 3.0, scores).words == [Z]
    assert _decode_penalised(graphs, -0.5, scores).words == [X, Y]
    assert _decode_penalised(graphs, 0.0, scores).cost == 0.0


def test_label_that_is_not_a_word_is_refused(tmp_path):
    with pytest.raises(AsrdistError, match=r"HCLG.fst: an arc outputs label 9"):
        PenaltyGraph(_two_paths(tmp_path, extra_olabel=9), [X, Y, Z],
                     SimpleNamespace(tid_to_pdf=np.array([-1, 0, 1]), num_pdfs=2))


def _composed(hclg, word_ids, penalty):
    """The old way, written out here: HCLG o (one state, a self-loop w:w/penalty per word)."""
    loop = kaldifst.StdVectorFst()
    state = loop.add_state()
    loop.start = state
    loop.set_final(state, 0.0)
    for w in sorted(word_ids):
        loop.add_arc(state, kaldifst.StdArc(w, w, penalty, state))
    out = kaldifst.compose(hclg, loop, match_side="right")
    kaldifst.arcsort(out, sort_type="ilabel")
    return out


@pytest.mark.parametrize("sentence", ["dog sit on cat", "cat sat", "sit"])
def test_same_best_path_and_cost_as_the_composed_graph(tiny_system, tiny_graph, tmp_path,
                                                       sentence):
    from asrdist.decode.graph import read_fst

    words = read_symbols(tiny_graph / "words.txt")
    real = [i for w, i in words.items() if w in ("cat", "dog", "sat", "sit", "on", "<unk>")]
    hclg = read_fst(tiny_graph / "HCLG.fst")
    rng = np.random.default_rng(len(sentence))
    pdfs = tiny_system.pdf_frames(sentence)
    # noisy scores: no two paths cost exactly the same
    scores = rng.normal(-6.0, 1.0, (len(pdfs), tiny_system.trans.num_pdfs)).astype(np.float32)
    scores[np.arange(len(pdfs)), pdfs] += 3.0
    graphs = PenaltyGraph(tiny_graph / "HCLG.fst", real, tiny_system.trans)
    seen = set()
    for penalty in (0.5, 20.0, -20.0, 0.0, 60.0):
        old = _decode(_composed(hclg, real, penalty) if penalty else hclg, tiny_system.trans,
                      scores, acwt=0.5)
        new = _decode_penalised(graphs, penalty, scores, acwt=0.5)
        assert (new.words, new.alignment) == (old.words, old.alignment)
        assert new.cost == pytest.approx(old.cost, rel=1e-5)  # float32 sums in another order
        seen.add(tuple(new.words))
    assert len(seen) > 1  # the penalties change the best path, not only its cost
