"""Viterbi decoding over HCLG: a score matrix that spells a sentence decodes to it."""

from __future__ import annotations

import numpy as np
import pytest

from asrdist.decode.decoder import (
    DecodeOptions,
    Decoder,
    check_compatible,
    max_input_label,
)
from asrdist.decode.graph import read_fst
from asrdist.decode.word_align import WordAligner
from asrdist.decode.word_penalty import PenaltyGraph
from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import read_symbols


def _scores(tiny_system, sentence: str) -> np.ndarray:
    pdfs = tiny_system.pdf_frames(sentence)
    scores = np.full((len(pdfs), tiny_system.trans.num_pdfs), -10.0, dtype=np.float32)
    scores[np.arange(len(pdfs)), pdfs] = 0.0
    return scores


@pytest.mark.parametrize("sentence", ["dog sit on cat", "cat sat", "sit"])
def test_scores_spelling_a_sentence_decode_to_it(tiny_system, tiny_graph, sentence):
    words = read_symbols(tiny_graph / "words.txt")
    id2word = {i: w for w, i in words.items()}
    hyp = Decoder(read_fst(tiny_graph / "HCLG.fst"), tiny_system.trans,
                  DecodeOptions(acwt=1.0)).decode(_scores(tiny_system, sentence))
    assert hyp is not None and hyp.reached_final
    assert " ".join(id2word[w] for w in hyp.words) == sentence
    assert len(hyp.alignment) == len(tiny_system.pdf_frames(sentence))


def test_word_timings_follow_the_alignment(tiny_system, tiny_graph):
    words = read_symbols(tiny_graph / "words.txt")
    hclg = read_fst(tiny_graph / "HCLG.fst")
    hyp = Decoder(hclg, tiny_system.trans, DecodeOptions(acwt=1.0)).decode(
        _scores(tiny_system, "dog sit"))
    lexicon = [[int(x) for x in line.split()]
               for line in (tiny_graph / "phones/align_lexicon.int").read_text().splitlines()]
    timed = WordAligner(tiny_system.trans, lexicon).align(hyp.alignment, hyp.words)
    # 5 silence states x 3 frames, then 3 phones x 3 states x 3 frames per word
    assert timed == [(words["dog"], 15, 27), (words["sit"], 42, 27)]


def test_word_insertion_penalty_costs_each_word(tiny_system, tiny_graph):
    hclg = read_fst(tiny_graph / "HCLG.fst")
    words = read_symbols(tiny_graph / "words.txt")
    real = [i for w, i in words.items() if w in ("cat", "dog", "sat", "sit", "on", "<unk>")]
    scores = _scores(tiny_system, "dog sit")
    plain = Decoder(hclg, tiny_system.trans, DecodeOptions(acwt=1.0)).decode(scores)
    graph = PenaltyGraph(tiny_graph / "HCLG.fst", real, tiny_system.trans)
    graph.set_penalty(2.5)
    penalised = Decoder(graph.fst, graph.trans, DecodeOptions(acwt=1.0)).decode(
        graph.scores(scores, 1.0))
    assert penalised.words == plain.words
    assert penalised.cost == pytest.approx(plain.cost + 5.0, abs=1e-3)


def test_graph_of_another_model_is_refused(tiny_system, tiny_graph):
    trans = tiny_system.trans
    top = max_input_label(read_fst(tiny_graph / "HCLG.fst"))
    check_compatible(top, trans.num_pdfs, trans, trans.num_pdfs, _names())
    with pytest.raises(AsrdistError, match="has 7 outputs but the transition model"):
        check_compatible(top, trans.num_pdfs, trans, 7, _names())
    with pytest.raises(AsrdistError, match="built for 99 pdfs"):
        check_compatible(top, 99, trans, trans.num_pdfs, _names())
    with pytest.raises(AsrdistError, match="uses transition-id"):
        check_compatible(trans.num_transition_ids + 1, None, trans, trans.num_pdfs, _names())


def _names() -> dict[str, str]:
    return {"graph": "exp/graph", "trans": "exp/mono/final.mdl", "model": "final.pt"}
