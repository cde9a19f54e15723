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
