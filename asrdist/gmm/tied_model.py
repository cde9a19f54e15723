"""A tied-state model from a new tree: its first GMMs (gmm-init-model) and the previous
system's alignments rewritten for it (convert-ali).

Each leaf's GMM starts as one Gaussian of the tree statistics that reach it (variance floor
0.01 as gmm-init-model's); a leaf no statistics reach, which Kaldi warns about, starts from
all statistics pooled. Converting an alignment keeps every frame's phone, HMM state and
transition and only swaps the pdfs for those the new tree gives the phone in its context.
"""

from __future__ import annotations

import logging

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.gmm.tree_stats import TreeStats
from asrdist.hmm.event_map import EventMap, lookup
from asrdist.hmm.phone_ali import TransitionTable, split_to_phones
from asrdist.kaldi.transition_model import TransitionInfo

log = logging.getLogger(__name__)

VAR_FLOOR = 0.01


def init_tied_gmms(stats: TreeStats, tree: EventMap,
                   num_pdfs: int) -> tuple[khg.AmDiagGmm, np.ndarray]:
    """One Gaussian per pdf from the statistics of its events; also the pdfs' frame counts."""
    _, rows = stats.keys_and_rows()
    pdf_of = np.array([lookup(tree, dict(e)) for e in sorted(stats.events)], dtype=np.int64)
    if np.any(pdf_of < 0) or pdf_of.max() >= num_pdfs:
        raise AsrdistError("the tree does not map every statistics event to a pdf")
    per_pdf = np.zeros((num_pdfs, rows.shape[1]))
    np.add.at(per_pdf, pdf_of, rows)
    empty = np.flatnonzero(per_pdf[:, 0] <= 0)
    if len(empty):
        log.warning("%d pdfs have no statistics (e.g. pdf %d); they start from the pooled "
                    "statistics", len(empty), empty[0])
        per_pdf[empty] = rows.sum(axis=0)
    dim = stats.dim
    am = khg.AmDiagGmm()
    for row in per_pdf:
        mean = row[1:dim + 1] / row[0]
        var = np.maximum(row[dim + 1:] / row[0] - mean * mean, VAR_FLOOR)
        gmm = khg.DiagGmm(nmix=1, dim=dim)
        gmm.set_weights(np.ones(1, dtype=np.float32))
        gmm.set_invvars_and_means((1.0 / var).astype(np.float32)[None, :],
                                  mean.astype(np.float32)[None, :])
        gmm.compute_gconsts()
        am.add_pdf(gmm)
    am.compute_gconsts()
    occs = per_pdf[:, 0].astype(np.float32)
    occs[empty] = 0.0
    return am, occs


class AlignmentConverter:
    """convert-ali from one transition model to another built on ``tree`` (any Kaldi tree)."""

    def __init__(self, old: TransitionInfo, new: TransitionInfo, tree: khg.ContextDependency):
        if old.topology != new.topology:
            raise AsrdistError("convert-ali: the two models have different topologies")
        self.old = TransitionTable.of(old)
        self.topology = new.topology
        self.tree, self.width, self.central = tree, tree.context_width, tree.central_position
        new_table = TransitionTable.of(new)
        self.first_tid = {s: int(np.flatnonzero(new_table.tstate == s)[0])
                          for s in range(1, len(new.tuples) + 1)}
        self.tstate = {tuple(t): s for s, t in enumerate(new.tuples, 1)}

    def _new_tstate(self, ctx: tuple[int, ...], hmm_state: int, utt: str) -> int:
        state = self.topology.entry(ctx[self.central])[hmm_state]
        pdfs = []
        for pdf_class in (state.forward_pdf_class, state.self_loop_pdf_class):
            ok, pdf = self.tree.compute(list(ctx), pdf_class)
            if not ok:
                raise AsrdistError(f"utterance {utt}: the tree has no pdf for phones {ctx}")
            pdfs.append(pdf)
        key = (ctx[self.central], hmm_state, pdfs[0], pdfs[1])
        if key not in self.tstate:
            raise AsrdistError(f"utterance {utt}: transition state {key} not in the new model")
        return self.tstate[key]

    def convert(self, utt: str, tids: np.ndarray) -> np.ndarray:
        segs = split_to_phones(self.old, tids, utt)
        contexts = segs.context(self.width, self.central)
        out = np.empty_like(tids)
        cache: dict[tuple[tuple[int, ...], int], int] = {}
        instance = segs.frame_instance()
        for f, tid in enumerate(tids):
            ctx = tuple(contexts[instance[f]].tolist())
            hmm_state = int(self.old.hmm_state[tid])
            if (ctx, hmm_state) not in cache:
                cache[ctx, hmm_state] = self._new_tstate(ctx, hmm_state, utt)
            out[f] = self.first_tid[cache[ctx, hmm_state]] + self.old.index[tid]
        return out
