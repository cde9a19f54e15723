"""Sequence-discriminative objectives of a network's scores over an utterance's denominator
lattice: MMI, boosted MMI and sMBR as Kaldi's discriminative training defines them.

The lattice keeps its graph costs and takes the network's current scores as its acoustics
(lattice-rescore-mapped); with acoustic scale kappa the objective is

    F = kappa * sum_t s[t, num_t] - log sum_paths exp(-graph + kappa * sum_t s[t, pdf_t])

(the numerator's graph cost is constant in the network and left out), and its gradient with
respect to the scores is ``kappa * (gamma_num - gamma_den)``: the denominator occupancies are
lattice posteriors, computed in double precision off the autograd graph by one vectorised
forward-backward (:mod:`asrdist.train.lattice_arrays`). Boosted MMI (``boost`` b) adds
``-b`` times each frame's phone error against the numerator to the denominator's graph
costs (Kaldi's LatticeBoost, silence errors weighted ``max_silence_error``). Frames whose
numerator pdf the lattice never reaches get no gradient (Kaldi's ``--drop-frames``).

sMBR's objective is the expected state-level accuracy against the numerator (Kaldi's
lattice-to-smbr-post), its gradient ``kappa`` times the signed posteriors ``gamma *
(accuracy through the arc - expected accuracy)``. Both are checked against the per-state
reference of :mod:`asrdist.decode.lattice_post`, itself checked against Kaldi's binaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from asrdist.decode.lattice import CompactLattice
from asrdist.errors import AsrdistError
from asrdist.train.lattice_arrays import (
    LatticeArrays,
    arc_costs,
    expected_accuracy,
    forward_backward,
    lattice_arrays,
    occupancies,
)


@dataclass(frozen=True)
class SequenceOptions:
    """The objective's settings, as Kaldi's discriminative training names them."""

    criterion: str = "mmi"  # mmi (boosted when boost > 0) or smbr
    acoustic_scale: float = 0.1  # kappa
    boost: float = 0.0  # b of boosted MMI; 0 is plain MMI
    max_silence_error: float = 0.0  # a wrong silence frame's error under boosting
    drop_frames: bool = True  # no gradient where the numerator is outside the lattice
    one_silence_class: bool = False  # sMBR: silence for silence is correct


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

    def is_silence(self, tids: np.ndarray) -> np.ndarray:
        return np.isin(self.tid_to_phone[tids], sorted(self.silence_phones))


def _arrays(lat: LatticeArrays | CompactLattice, scores: np.ndarray,
            num: Numerator) -> LatticeArrays:
    arrays = lat if isinstance(lat, LatticeArrays) else lattice_arrays(lat)
    if scores.shape[0] != len(num.alignment):
        raise AsrdistError(f"{scores.shape[0]} frames of scores but {len(num.alignment)} of "
                           "numerator alignment")
    if arrays.frames != len(num.alignment):
        raise AsrdistError(f"the lattice has {arrays.frames} frames, the numerator "
                           f"{len(num.alignment)}")
    top = int(arrays.elem_tid.max(initial=0))
    if top >= len(num.tid_to_pdf):
        raise AsrdistError(f"transition-id {top} is not in the model's "
                           f"{len(num.tid_to_pdf) - 1}: lattice, alignment and model disagree")
    return arrays


def _boosted_graph(lat: LatticeArrays, num: Numerator, opts: SequenceOptions) -> np.ndarray:
    """LatticeBoost: every frame whose phone differs from the numerator's lowers its arc's
    graph cost by ``boost`` (``boost * max_silence_error`` for a silence phone)."""
    if opts.boost == 0.0:
        return lat.graph
    ref_phones = num.tid_to_phone[num.alignment]
    wrong = num.tid_to_phone[lat.elem_tid] != ref_phones[lat.elem_t]
    error = np.where(num.is_silence(lat.elem_tid), opts.max_silence_error, 1.0) * wrong
    return lat.graph - opts.boost * np.bincount(lat.elem_arc, weights=error,
                                                minlength=lat.num_arcs)


def objective_and_gradient(scores: np.ndarray, lat: LatticeArrays | CompactLattice,
                           num: Numerator, opts: SequenceOptions
                           ) -> tuple[float, np.ndarray, int]:
    """The (boosted) MMI objective of one utterance's ``scores`` (frames, pdfs), its
    gradient ``kappa * (gamma_num - gamma_den)`` and the frames that keep a gradient."""
    lat = _arrays(lat, scores, num)
    kappa = opts.acoustic_scale
    cost = arc_costs(lat, scores, num.tid_to_pdf, kappa, _boosted_graph(lat, num, opts))
    fb = forward_backward(lat, cost)
    gamma = occupancies(lat, fb, num.tid_to_pdf, scores.shape)
    frames, pdfs = np.arange(len(num.alignment)), num.pdfs
    keep = gamma[frames, pdfs] > 0.0 if opts.drop_frames else np.ones(len(pdfs), dtype=bool)
    grad = -kappa * gamma
    grad[frames, pdfs] += kappa
    grad[~keep] = 0.0
    objective = kappa * float(scores[frames, pdfs].sum()) - fb.total
    return objective, grad, int(keep.sum())


def smbr_accuracy(lat: LatticeArrays, num: Numerator, one_silence_class: bool) -> np.ndarray:
    """Per arc, its frames' state-level accuracy against the numerator: 1 where the pdf is the
    numerator's (never on silence, or, with ``one_silence_class``, also where both are
    silence), as lattice-to-smbr-post counts it."""
    same = num.tid_to_pdf[lat.elem_tid] == num.pdfs[lat.elem_t]
    silence = num.is_silence(lat.elem_tid)
    if one_silence_class:
        right = same | (silence & num.is_silence(num.alignment)[lat.elem_t])
    else:
        right = same & ~silence
    return np.bincount(lat.elem_arc, weights=right.astype(np.float64), minlength=lat.num_arcs)


def smbr_objective_and_gradient(scores: np.ndarray, lat: LatticeArrays | CompactLattice,
                                num: Numerator, opts: SequenceOptions
                                ) -> tuple[float, np.ndarray, int]:
    """sMBR's expected frame accuracy of one utterance's ``scores`` (frames, pdfs), its
    gradient ``kappa`` times the signed posteriors summed by pdf, and the frames."""
    lat = _arrays(lat, scores, num)
    kappa = opts.acoustic_scale
    cost = arc_costs(lat, scores, num.tid_to_pdf, kappa)
    fb = forward_backward(lat, cost)
    expected, signed = expected_accuracy(lat, fb, cost,
                                         smbr_accuracy(lat, num, opts.one_silence_class))
    grad = kappa * occupancies(lat, fb, num.tid_to_pdf, scores.shape, weights=signed)
    return expected, grad, len(num.alignment)


def sequence_loss(scores: torch.Tensor,
                  utterances: Sequence[tuple[LatticeArrays | CompactLattice, Numerator]],
                  opts: SequenceOptions) -> torch.Tensor:
    """Minus the summed objective of ``utterances`` (each a lattice and its numerator, their
    frames in order in ``scores``: the network's log-likelihoods, priors subtracted),
    differentiable in ``scores``; the scores come to the host once for all of them."""
    compute = smbr_objective_and_gradient if opts.criterion == "smbr" else objective_and_gradient
    host = scores.detach().double().cpu().numpy()
    grad = np.zeros_like(host)
    objective, start = 0.0, 0
    for lat, num in utterances:
        end = start + len(num.alignment)
        value, grad[start:end], _ = compute(host[start:end], lat, num, opts)
        objective, start = objective + value, end
    if start != len(host):
        raise AsrdistError(f"{len(host)} frames of scores but {start} of numerator alignment")
    return _WithGradient.apply(scores, scores.new_tensor(-objective),
                               torch.from_numpy(-grad).to(scores))


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
