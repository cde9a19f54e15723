"""Sequence-discriminative objectives of a network's scores over an utterance's denominator
lattice: MMI and boosted MMI as Kaldi's discriminative training defines them.

The lattice keeps its graph costs and takes the network's current scores as its acoustics
(``rescore_acoustics``); with acoustic scale kappa the objective is

    F = kappa * sum_t s[t, num_t] - log sum_paths exp(-graph + kappa * sum_t s[t, pdf_t])

(the numerator's graph cost is constant in the network and left out), and its gradient with
respect to the scores is ``kappa * (gamma_num - gamma_den)``: the denominator occupancies are
lattice posteriors (``lattice_posteriors``), computed in double precision off the autograd
graph, so a lattice of any shape costs one forward-backward. Boosted MMI (``boost`` b) adds
``-b`` times each frame's phone error against the numerator to the denominator's graph
costs (Kaldi's LatticeBoost, silence errors weighted ``max_silence_error``). Frames whose
numerator pdf the lattice never reaches get no gradient (Kaldi's ``--drop-frames``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from asrdist.decode.lattice import CompactLattice
from asrdist.decode.lattice_post import lattice_posteriors, rescore_acoustics, state_times
from asrdist.errors import AsrdistError


@dataclass(frozen=True)
class MmiOptions:
    """The objective's settings, as Kaldi's discriminative training names them."""

    acoustic_scale: float = 0.1  # kappa
    boost: float = 0.0  # b of boosted MMI; 0 is plain MMI
    max_silence_error: float = 0.0  # a wrong silence frame's error under boosting
    drop_frames: bool = True  # no gradient where the numerator is outside the lattice


@dataclass(frozen=True)
class Numerator:
    """An utterance's numerator alignment (transition-ids) and the model's maps."""

    alignment: np.ndarray
    tid_to_pdf: np.ndarray
    tid_to_phone: np.ndarray
    silence_phones: frozenset[int] = frozenset()

    @property
    def pdfs(self) -> np.ndarray:
        return self.tid_to_pdf[self.alignment]


def boosted(clat: CompactLattice, num: Numerator, opts: MmiOptions) -> CompactLattice:
    """LatticeBoost: every frame whose phone differs from the numerator's lowers its arc's
    graph cost by ``boost`` (``boost * max_silence_error`` for a silence phone)."""
    if opts.boost == 0.0:
        return clat
    ref_phones = num.tid_to_phone[num.alignment]
    silence = sorted(num.silence_phones)

    def boost(graph: float, start: int, tids: tuple[int, ...]) -> np.float32:
        phones = num.tid_to_phone[np.asarray(tids, dtype=np.int64)]
        wrong = phones != ref_phones[start:start + len(tids)]
        errors = np.where(np.isin(phones, silence), opts.max_silence_error, 1.0)[wrong].sum()
        return np.float32(graph - opts.boost * errors)

    times = state_times(clat)
    arcs = [[(w, (boost(g, times[s], t), a), t, n) for w, (g, a), t, n in clat.arcs[s]]
            for s in range(clat.num_states)]
    final = [None if f is None else ((boost(f[0][0], times[s], f[1]), f[0][1]), f[1])
             for s, f in enumerate(clat.final)]
    return CompactLattice(arcs=arcs, final=final, start=clat.start)


def objective_and_gradient(scores: np.ndarray, clat: CompactLattice, num: Numerator,
                           opts: MmiOptions) -> tuple[float, np.ndarray, int]:
    """The (boosted) MMI objective of one utterance's ``scores`` (frames, pdfs), its
    gradient ``kappa * (gamma_num - gamma_den)`` and the frames that keep a gradient."""
    if scores.shape[0] != len(num.alignment):
        raise AsrdistError(f"{scores.shape[0]} frames of scores but {len(num.alignment)} of "
                           "numerator alignment")
    kappa = opts.acoustic_scale
    den = rescore_acoustics(boosted(clat, num, opts), scores, num.tid_to_pdf)
    post, log_z = lattice_posteriors(den, kappa)
    gamma = np.zeros(scores.shape, dtype=np.float64)
    for t, frame in enumerate(post):
        for tid, p in frame:
            gamma[t, num.tid_to_pdf[tid]] += p
    frames, pdfs = np.arange(len(num.alignment)), num.pdfs
    keep = gamma[frames, pdfs] > 0.0 if opts.drop_frames else np.ones(len(pdfs), dtype=bool)
    grad = -kappa * gamma
    grad[frames, pdfs] += kappa
    grad[~keep] = 0.0
    objective = kappa * float(scores[frames, pdfs].sum()) - log_z
    return objective, grad, int(keep.sum())


def mmi_loss(scores: torch.Tensor, clat: CompactLattice, num: Numerator,
             opts: MmiOptions) -> tuple[torch.Tensor, int]:
    """Minus the objective, differentiable in ``scores`` (the network's log-likelihoods,
    priors subtracted), and the frames that got a gradient."""
    objective, grad, kept = objective_and_gradient(
        scores.detach().double().cpu().numpy(), clat, num, opts)
    value = scores.new_tensor(-objective)
    return _WithGradient.apply(scores, value, torch.from_numpy(-grad).to(scores)), kept


class _WithGradient(torch.autograd.Function):
    """``value`` whose gradient with respect to ``scores`` is the given ``grad``."""

    @staticmethod
    def forward(ctx, scores: torch.Tensor, value: torch.Tensor,  # noqa: ARG004
                grad: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(grad)
        return value.clone()

    @staticmethod
    def backward(ctx, grad_value: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (grad,) = ctx.saved_tensors
        return grad * grad_value, None, None
