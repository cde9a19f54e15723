"""Viterbi decoding of one utterance's acoustic score matrix over HCLG.

The decoder is kaldi-hmm-gmm's FasterDecoder (Kaldi's beam search, with beam / max-active /
min-active) fed through DecodableCtc, which reads column ``tid - 1`` of a frames x
transition-ids matrix: each pdf score is scaled by the acoustic scale and copied to the
columns of its transition-ids (decode-faster-mapped's mapping). A word insertion penalty is
put on the graph's word arcs (:mod:`asrdist.decode.word_penalty`), which is what Kaldi's
lattice-add-penalty does to a lattice's best path.
"""

from __future__ import annotations

from dataclasses import dataclass

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import kaldifst
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.kaldi.transition_model import TransitionInfo


@dataclass(frozen=True)
class DecodeOptions:
    """Kaldi's decoding knobs (decode.sh defaults: beam 13, max-active 7000)."""

    acwt: float = 0.1
    beam: float = 13.0
    max_active: int = 7000
    min_active: int = 200


@dataclass
class Hypothesis:
    """The best path of one utterance."""

    words: list[int]
    alignment: list[int]  # transition-id per frame
    cost: float
    reached_final: bool


def max_input_label(fst: kaldifst.StdFst) -> int:
    """The largest input label of an FST (a transition-id for HCLG).

    On an ilabel-sorted FST (ours, and Kaldi's HCLG) only each state's last arc is read,
    which is several times faster than visiting every arc of a large graph.
    """
    top = 0
    sorted_ = fst.is_ilabel_sorted
    for s in range(fst.num_states):
        arcs = kaldifst.ArcIterator(fst, s)
        if sorted_:
            n = fst.num_arcs(s)
            if n:
                arcs.seek(n - 1)
                top = max(top, arcs.value.ilabel)
            continue
        for arc in arcs:
            top = max(top, arc.ilabel)
    return top


def check_compatible(hclg_max_tid: int, graph_num_pdfs: int | None, trans: TransitionInfo,
                     scorer_num_pdfs: int, what: dict[str, str]) -> None:
    """Refuse a graph, transition model and acoustic model that do not belong together.

    ``what`` names the files for the message: keys graph, trans, model.
    """
    if scorer_num_pdfs != trans.num_pdfs:
        raise AsrdistError(
            f"{what['model']} has {scorer_num_pdfs} outputs but the transition model "
            f"{what['trans']} has {trans.num_pdfs} pdfs"
        )
    if graph_num_pdfs is not None and graph_num_pdfs != trans.num_pdfs:
        raise AsrdistError(
            f"{what['graph']} was built for {graph_num_pdfs} pdfs but {what['trans']} has "
            f"{trans.num_pdfs}: the graph does not belong to this model"
        )
    if hclg_max_tid > trans.num_transition_ids:
        raise AsrdistError(
            f"{what['graph']} uses transition-id {hclg_max_tid} but {what['trans']} has only "
            f"{trans.num_transition_ids}: the graph does not belong to this model"
        )


def expand_to_tids(pdf_scores: np.ndarray, tid_to_pdf: np.ndarray, acwt: float) -> np.ndarray:
    """frames x transition-ids matrix of scaled scores (column t-1 for transition-id t)."""
    return np.ascontiguousarray(acwt * pdf_scores[:, tid_to_pdf[1:]], dtype=np.float32)


class Decoder:
    """Beam-search Viterbi over one graph, reused across utterances."""

    def __init__(self, hclg: kaldifst.StdFst, trans: TransitionInfo, opts: DecodeOptions):
        self.opts = opts
        self.tid_to_pdf = trans.tid_to_pdf
        self.hclg = hclg  # the C++ decoder keeps a reference only: keep the FST alive
        self.decoder = khg.FasterDecoder(hclg, khg.FasterDecoderOptions(
            beam=opts.beam, max_active=opts.max_active, min_active=opts.min_active))

    def decode(self, pdf_scores: np.ndarray) -> Hypothesis | None:
        """Best path for a frames x pdfs score matrix; None when no path survives the beam."""
        if pdf_scores.ndim != 2 or pdf_scores.shape[0] == 0:
            raise AsrdistError("cannot decode an empty score matrix")
        matrix = expand_to_tids(pdf_scores, self.tid_to_pdf, self.opts.acwt)
        decodable = khg.DecodableCtc(matrix)
        self.decoder.decode(decodable)
        reached = self.decoder.reached_final()
        ok, best = self.decoder.get_best_path(use_final_probs=reached)
        if not ok:
            return None
        ok, alignment, words, weight = kaldifst.get_linear_symbol_sequence(best)
        if not ok:
            return None
        return Hypothesis(list(words), list(alignment), weight.value1 + weight.value2, reached)
