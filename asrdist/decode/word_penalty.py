"""Every word insertion penalty of a sweep over one graph, read once and never rewritten.

Kaldi's ``lattice-add-penalty`` adds the penalty to the cost of every word; asrdist searches
the graph once per penalty, with the penalty on every arc that outputs a word. The graph is
read once per job, with the input label t of every word arc that also consumes a frame
turned into t + T (T: the transition-ids of the model); the decoder's score matrix gets T
columns more, column t + T holding column t's score less penalty / acwt, so that such an arc
costs what it would with the penalty on it, and changing the penalty costs nothing. The
alignment is mapped back to the real transition-ids. A word arc that consumes no frame
(input label 0: Kaldi's graphs can have some) gets the penalty on its cost, rewritten in
place for each penalty: only the states holding such arcs are touched.

Replaced (measured in bench/RESULTS.md, "Decoding: reading Kaldi's const graphs"): a scratch
copy of the graph file whose word-arc costs were rewritten and read back for every penalty.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence

import kaldi_hmm_gmm  # noqa: F401  (before kaldifst, or the process hangs)
import kaldifst
import numpy as np

from asrdist.decode.graph import fst_chunks, read_fst
from asrdist.errors import AsrdistError
from asrdist.kaldi.transition_model import TransitionInfo


class PenaltyGraph:
    """HCLG read once, searched under any word insertion penalty."""

    def __init__(self, hclg: str | os.PathLike, word_ids: Sequence[int], trans: TransitionInfo):
        self.offset = len(trans.tid_to_pdf) - 1  # T: word arcs' labels move past it
        labels, eps_states, eps_arcs, eps_costs = [], [], [], []
        first_state = 0
        for _, narcs, arcs in fst_chunks(hclg):
            word = arcs["o"] != 0
            labels.append(np.unique(arcs["o"][word]))
            eps = np.nonzero(word & (arcs["i"] == 0))[0]
            if len(eps):
                state = np.repeat(np.arange(len(narcs)), narcs)[eps]
                eps_states.append(state + first_state)
                eps_arcs.append(eps - (np.cumsum(narcs) - narcs)[state])
                eps_costs.append(arcs["w"][eps])
            first_state += len(narcs)
        found = np.unique(np.concatenate(labels)) if labels else np.zeros(0, np.int32)
        strange = np.setdiff1d(found, np.asarray(list(word_ids), dtype=np.int32))
        if len(strange):
            raise AsrdistError(f"{hclg}: an arc outputs label {strange[0]}, which is not a word "
                               "of words.txt (#0, <s>, </s>?): no penalty can be put on it")
        self.eps_states = np.concatenate(eps_states) if eps_states else np.zeros(0, np.int64)
        self.eps_arcs = np.concatenate(eps_arcs) if eps_arcs else np.zeros(0, np.int64)
        self.eps_costs = np.concatenate(eps_costs) if eps_costs else np.zeros(0, "<f4")
        self.fst = read_fst(hclg, relabel=self.offset)
        self.trans = copy.copy(trans)  # what the decoder reads: the extra columns' pdfs
        self.trans.tid_to_pdf = np.concatenate(
            [trans.tid_to_pdf, trans.tid_to_pdf[1:] + trans.num_pdfs])
        self.penalty = 0.0

    def set_penalty(self, penalty: float) -> None:
        """Put ``penalty`` on the word arcs that consume no frame (the others take it from
        ``scores``)."""
        if penalty == self.penalty:
            return
        new = (self.eps_costs + np.float32(penalty)).astype("<f4")
        bounds = np.flatnonzero(np.diff(self.eps_states)) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(self.eps_states)], strict=True):
            if lo == hi:
                continue
            state = int(self.eps_states[lo])
            arcs = list(kaldifst.ArcIterator(self.fst, state))
            for k, cost in zip(self.eps_arcs[lo:hi].tolist(), new[lo:hi].tolist(), strict=True):
                a = arcs[k]
                arcs[k] = kaldifst.StdArc(a.ilabel, a.olabel, cost, a.nextstate)
            self.fst.delete_arcs(state, len(arcs))
            for a in arcs:
                self.fst.add_arc(state, a)
        self.penalty = penalty

    def scores(self, pdf_scores: np.ndarray, acwt: float) -> np.ndarray:
        """The pdf scores, then the same less penalty / acwt: the word arcs' columns."""
        return np.concatenate([pdf_scores, pdf_scores - np.float32(self.penalty / acwt)], axis=1)

    def alignment(self, tids: Sequence[int]) -> list[int]:
        """A path's input labels as the model's transition-ids."""
        return [t - self.offset if t > self.offset else t for t in tids]
