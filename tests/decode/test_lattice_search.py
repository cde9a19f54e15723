"""Lattice search over a graph we built: a score matrix that spells a sentence decodes to it,
with its words' times; a graph of another model is refused."""

from __future__ import annotations

import numpy as np
import pytest

from asrdist.decode.decoder import check_compatible
from asrdist.decode.graph import max_ilabel
from asrdist.decode.lattice import LatticeDecoder, LatticeOptions, best_path
from asrdist.decode.word_align import WordAligner
from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import read_symbols


def _scores(tiny_system, sentence: str) -> np.ndarray:
    pdfs = tiny_system.pdf_frames(sentence)
    scores = np.full((len(pdfs), tiny_system.trans.num_pdfs), -10.0, dtype=np.float32)
    scores[np.arange(len(pdfs)), pdfs] = 0.0
    return scores


@pytest.fixture(scope="module")
def decoder(tiny_system, tiny_graph) -> LatticeDecoder:
    return LatticeDecoder(tiny_graph / "HCLG.fst", tiny_system.trans,
                          LatticeOptions(acwt=1.0))


@pytest.mark.parametrize("sentence", ["dog sit on cat", "cat sat", "sit"])
def test_scores_spelling_a_sentence_decode_to_it(tiny_system, tiny_graph, decoder, sentence):
    id2word = {i: w for w, i in read_symbols(tiny_graph / "words.txt").items()}
    path = best_path(decoder.decode(_scores(tiny_system, sentence)), 1.0, 0.0)
    assert decoder.reached_final
    assert " ".join(id2word[w] for w in path.words) == sentence
    assert len(path.alignment) == len(tiny_system.pdf_frames(sentence))


def test_word_timings_follow_the_best_paths_alignment(tiny_system, tiny_graph, decoder):
    words = read_symbols(tiny_graph / "words.txt")
    path = best_path(decoder.decode(_scores(tiny_system, "dog sit")), 1.0, 0.0)
    lexicon = [[int(x) for x in line.split()]
               for line in (tiny_graph / "phones/align_lexicon.int").read_text().splitlines()]
    timed = WordAligner(tiny_system.trans, lexicon).align(path.alignment, path.words)
    # 5 silence states x 3 frames, then 3 phones x 3 states x 3 frames per word
    assert timed == [(words["dog"], 15, 27), (words["sit"], 42, 27)]


def test_graph_of_another_model_is_refused(tiny_system, tiny_graph):
    trans = tiny_system.trans
    top = max_ilabel(tiny_graph / "HCLG.fst")
    check_compatible(top, trans.num_pdfs, trans, trans.num_pdfs, _names())
    with pytest.raises(AsrdistError, match="has 7 outputs but the transition model"):
        check_compatible(top, trans.num_pdfs, trans, 7, _names())
    with pytest.raises(AsrdistError, match="built for 99 pdfs"):
        check_compatible(top, 99, trans, trans.num_pdfs, _names())
    with pytest.raises(AsrdistError, match="uses transition-id"):
        check_compatible(trans.num_transition_ids + 1, None, trans, trans.num_pdfs, _names())


def _names() -> dict[str, str]:
    return {"graph": "exp/graph", "trans": "exp/mono/final.mdl", "model": "final.pt"}


def _fan_out_search(max_active: int) -> list[list[tuple[int, int, tuple, int]]]:
    """The compiled search's raw lattice on a graph that fans out from the start to states
    1..4 (transition-ids 1..4, words 1..4, no graph cost), each going on to the final state 5
    by transition-id 5; frame 0 scores the branches 0, -1, -3, -5, frame 1 the last arc 0."""
    from asrdist.decode.lattice import _native, from_kaldifst

    arcs = [(k, k, 0, k) for k in range(1, 5)] + [(5, 0, 0, 5)] * 4
    graph = _native.flat_graph(
        "fan.fst", 0, np.array([np.inf] * 5 + [0.0], dtype=np.float32),
        np.array([4, 1, 1, 1, 1, 0], dtype=np.int64), np.array(arcs, dtype=np.int32))
    scores = np.full((2, 5), -100.0, dtype=np.float32)
    scores[0, :4] = [0.0, -1.0, -3.0, -5.0]
    scores[1, 4] = 0.0
    search = _native.Search(graph, beam=100.0, max_active=max_active, min_active=0,
                                    lattice_beam=100.0)
    raw, reached_final = search.decode(scores)
    assert reached_final
    lat = from_kaldifst(raw)
    return [[(a[0], a[1], tuple(float(x) for x in a[2]), a[3]) for a in arcs]
            for arcs in lat.arcs]


def test_max_active_narrows_the_beam_to_the_max_active_th_best_token():
    """By hand: at frame 1 the four tokens cost 0, 1, 3, 5. Past max-active 2 the cutoff is
    the cost of the third best (sorted, index max-active: 3) and tokens at or under it are
    expanded: the branch of cost 5 ends there and is pruned with its link. At max-active 3
    (the cutoff: index 3, cost 5) all four go on, as the beam of 100 alone keeps them."""
    def branches(lat):
        return sorted(a[0] for a in lat[0])

    assert branches(_fan_out_search(2)) == [1, 2, 3]
    assert branches(_fan_out_search(3)) == [1, 2, 3, 4]
    lat = _fan_out_search(2)
    assert len(lat) == 5  # the start, three branches, the final state
    # acoustic costs -loglike (the frames' best token costs 0: offsets 0), graph costs 0
    assert sorted(a[2] for a in lat[0]) == [(0.0, 0.0), (0.0, 1.0), (0.0, 3.0)]


def test_an_arc_out_of_the_graph_is_one_line_naming_the_file():
    from asrdist.decode.lattice import _native

    graph = _native.flat_graph(
        "bad.fst", 0, np.array([np.inf, 0.0], dtype=np.float32), np.array([1, 0], dtype=np.int64),
        np.array([(1, 0, 0, 7)], dtype=np.int32))
    search = _native.Search(graph, beam=15.0, max_active=7000, min_active=200,
                                    lattice_beam=8.0)
    with pytest.raises(ValueError, match="^bad.fst: state 0 has an arc to a state outside the "
                                         "graph$"):
        search.decode(np.zeros((2, 1), dtype=np.float32))
    with pytest.raises(ValueError, match=r"^bad.fst: transition-id 1 is not in the model$"):
        search.decode(np.zeros((2, 0), dtype=np.float32))
