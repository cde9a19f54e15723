"""Per-frame transition-id posteriors of a lattice: Kaldi's ``lattice-to-post
--acoustic-scale=kappa`` (LatticeForwardBackward), what sequence training's denominator
occupancies are.

Each compact arc's cost is ``graph + kappa * acoustic``; forward and backward scores in the log
semiring over the topologically sorted states give each arc's posterior, which every frame of
its transition-id string receives (a final state's string too, as Kaldi's CompactLattice ->
Lattice conversion makes it arcs). Per frame, equal transition-ids are summed and sorted
(MergePairVectorSumming). The lattice's total log-likelihood is returned beside them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from asrdist.decode.lattice import CompactLattice, top_order
from asrdist.errors import AsrdistError

Posterior = list[list[tuple[int, float]]]  # per frame: (transition-id, posterior), sorted


@dataclass(frozen=True)
class _Arc:
    src: int
    dst: int | None  # None: the final weight of ``src``
    cost: float
    tids: tuple[int, ...]


def _scaled_cost(graph: float, acoustic: float, kappa: float) -> float:
    """A lattice weight's cost after ScaleLattice, as Kaldi computes it: each scaled part
    stored back as a float, then the two summed in double (ConvertToCost)."""
    return float(np.float32(graph)) + float(np.float32(kappa * float(acoustic)))


def _arcs(clat: CompactLattice, kappa: float) -> list[_Arc]:
    out = []
    for s, arcs in enumerate(clat.arcs):
        for _, (graph, acoustic), tids, nxt in arcs:
            out.append(_Arc(s, nxt, _scaled_cost(graph, acoustic, kappa), tuple(tids)))
        if clat.final[s] is not None:
            (graph, acoustic), tids = clat.final[s]
            if np.isfinite(graph) and np.isfinite(acoustic):
                out.append(_Arc(s, None, _scaled_cost(graph, acoustic, kappa), tuple(tids)))
    return out


def _state_times(clat: CompactLattice, order: list[int]) -> list[int]:
    """Frames before each state; a lattice whose paths reach a state at different times is
    not one decoding's (Kaldi's CompactLatticeStateTimes asserts the same)."""
    times: list[int | None] = [None] * clat.num_states
    times[clat.start] = 0
    for s in order:
        if times[s] is None:
            continue
        for _, _, tids, nxt in clat.arcs[s]:
            t = times[s] + len(tids)
            if times[nxt] is None:
                times[nxt] = t
            elif times[nxt] != t:
                raise AsrdistError(f"state {nxt} is reached after {times[nxt]} and {t} frames")
    return [t if t is not None else 0 for t in times]


@dataclass
class _ForwardBackward:
    """One lattice's arcs (final weights as arcs to None) with their log-semiring scores."""

    arcs: list[_Arc]
    out_of: list[list[_Arc]]  # the arcs leaving each state
    order: list[int]
    times: list[int]
    alpha: np.ndarray
    beta: np.ndarray
    total: float

    @property
    def frames(self) -> int:
        return max(self.times[a.src] + len(a.tids) for a in self.arcs)

    def arc_posterior(self, arc: _Arc) -> float:
        after = 0.0 if arc.dst is None else self.beta[arc.dst]
        return float(np.exp(self.alpha[arc.src] - arc.cost + after - self.total))


def _forward_backward(clat: CompactLattice, kappa: float) -> _ForwardBackward:
    if clat.num_states == 0:
        raise AsrdistError("an empty lattice has no posteriors")
    order = top_order([[a[3] for a in arcs] for arcs in clat.arcs])
    times = _state_times(clat, order)
    arcs = _arcs(clat, kappa)
    out_of: list[list[_Arc]] = [[] for _ in range(clat.num_states)]
    for arc in arcs:
        out_of[arc.src].append(arc)
    alpha = np.full(clat.num_states, -np.inf)
    alpha[clat.start] = 0.0
    total = -np.inf
    for s in order:
        for arc in out_of[s]:
            score = alpha[s] - arc.cost
            if arc.dst is None:
                total = np.logaddexp(total, score)
            else:
                alpha[arc.dst] = np.logaddexp(alpha[arc.dst], score)
    if not np.isfinite(total):
        raise AsrdistError("the lattice has no complete path")
    beta = np.full(clat.num_states, -np.inf)
    for s in reversed(order):
        for arc in out_of[s]:
            after = 0.0 if arc.dst is None else beta[arc.dst]
            beta[s] = np.logaddexp(beta[s], after - arc.cost)
    return _ForwardBackward(arcs, out_of, order, times, alpha, beta, float(total))


def _add(frame: dict[int, np.float32], tid: int, value: float) -> None:
    """Kaldi stores each arc's share as a float and sums equal transition-ids in float, so
    shares that cancel give exactly 0 (and are dropped): the same here."""
    frame[tid] = frame.get(tid, np.float32(0.0)) + np.float32(value)


def rescore_acoustics(clat: CompactLattice, loglikes: np.ndarray,
                      tid_to_pdf: np.ndarray) -> CompactLattice:
    """Kaldi's lattice-rescore-mapped: each arc's (and final string's) acoustic cost becomes
    minus the sum of ``loglikes[t, pdf]`` over its frames, the graph costs kept: a lattice
    scored by a network's current outputs, as sequence training needs it."""
    times = state_times(clat)
    frames = loglikes.shape[0]

    def cost(start: int, tids: tuple[int, ...]) -> np.float32:
        if start + len(tids) > frames:
            raise AsrdistError(f"the lattice runs past the scores' {frames} frames")
        pdfs = tid_to_pdf[np.asarray(tids, dtype=np.int64)]
        return np.float32(-loglikes[np.arange(start, start + len(tids)), pdfs].sum())

    arcs = [[(word, (graph, cost(times[s], tids)), tids, nxt)
             for word, (graph, _), tids, nxt in clat.arcs[s]] for s in range(clat.num_states)]
    final = [None if f is None else ((f[0][0], cost(times[s], f[1])), f[1])
             for s, f in enumerate(clat.final)]
    return CompactLattice(arcs=arcs, final=final, start=clat.start)


def _merged(sums: list[dict[int, np.float32]]) -> Posterior:
    """MergePairVectorSumming: equal transition-ids summed, sorted, zeros dropped."""
    return [sorted((t, float(p)) for t, p in f.items() if p != 0.0) for f in sums]


def state_times(clat: CompactLattice) -> list[int]:
    """Frames before each state (Kaldi's CompactLatticeStateTimes)."""
    return _state_times(clat, top_order([[a[3] for a in arcs] for arcs in clat.arcs]))


def lattice_posteriors(clat: CompactLattice, kappa: float = 1.0) -> tuple[Posterior, float]:
    """Transition-id posteriors per frame and the total log-likelihood (minus the lowest
    total cost, in the log semiring) of ``clat`` with acoustics scaled by ``kappa``."""
    fb = _forward_backward(clat, kappa)
    sums: list[dict[int, np.float32]] = [{} for _ in range(fb.frames)]
    for arc in fb.arcs:
        post = fb.arc_posterior(arc)
        for k, tid in enumerate(arc.tids):
            _add(sums[fb.times[arc.src] + k], tid, post)
    return _merged(sums), fb.total


@dataclass(frozen=True)
class SmbrReference:
    """What sMBR's state-level accuracy compares a lattice's frames with: the numerator
    alignment's transition-ids and the model's tid -> pdf and tid -> phone maps."""

    alignment: np.ndarray
    tid_to_pdf: np.ndarray
    tid_to_phone: np.ndarray
    silence_phones: frozenset[int]
    one_silence_class: bool = False

    def frame_accuracy(self, tid: int, t: int) -> float:
        """1 where the frame's pdf is the reference's (Kaldi: never on silence, or, with
        ``one_silence_class``, also where both are silence), else 0."""
        ref = int(self.alignment[t])
        same_pdf = self.tid_to_pdf[tid] == self.tid_to_pdf[ref]
        is_sil = int(self.tid_to_phone[tid]) in self.silence_phones
        if not self.one_silence_class:
            return float(same_pdf and not is_sil)
        return float(same_pdf or (is_sil and int(self.tid_to_phone[ref]) in self.silence_phones))


def smbr_posteriors(clat: CompactLattice, ref: SmbrReference,
                    kappa: float = 1.0) -> tuple[Posterior, float]:
    """sMBR's per-frame signed posteriors, ``gamma * (expected accuracy through the arc -
    expected accuracy)``, and the expected frame accuracy: Kaldi's
    LatticeForwardBackwardMpeVariants with criterion smbr (lattice-to-smbr-post)."""
    fb = _forward_backward(clat, kappa)
    if fb.frames != len(ref.alignment):
        raise AsrdistError(f"the lattice has {fb.frames} frames, its alignment "
                           f"{len(ref.alignment)}")
    top = max(max((max(a.tids, default=0) for a in fb.arcs), default=0),
              int(ref.alignment.max(initial=0)))
    if top >= len(ref.tid_to_pdf):
        raise AsrdistError(f"transition-id {top} is not in the model's "
                           f"{len(ref.tid_to_pdf) - 1}: lattice, alignment and model disagree")
    acc = {id(a): sum(ref.frame_accuracy(tid, fb.times[a.src] + k)
                      for k, tid in enumerate(a.tids)) for a in fb.arcs}
    alpha_acc = np.zeros(len(fb.alpha))
    expected = 0.0
    for s in fb.order:
        if not np.isfinite(fb.alpha[s]):
            continue  # unreachable from the start: on no path
        for arc in fb.out_of[s]:
            through = alpha_acc[s] + acc[id(arc)]
            if arc.dst is None:
                expected += np.exp(fb.alpha[s] - arc.cost - fb.total) * through
            else:
                alpha_acc[arc.dst] += np.exp(fb.alpha[s] - arc.cost - fb.alpha[arc.dst]) * through
    beta_acc = np.zeros(len(fb.alpha))
    for s in reversed(fb.order):
        if not np.isfinite(fb.beta[s]):
            continue  # reaches no final state: on no path
        for arc in fb.out_of[s]:
            after, after_acc = (0.0, 0.0) if arc.dst is None else (fb.beta[arc.dst],
                                                                   beta_acc[arc.dst])
            beta_acc[s] += np.exp(after - arc.cost - fb.beta[s]) * (after_acc + acc[id(arc)])
    sums: list[dict[int, np.float32]] = [{} for _ in range(fb.frames)]
    for arc in fb.arcs:
        after_acc = 0.0 if arc.dst is None else beta_acc[arc.dst]
        signed = fb.arc_posterior(arc) * (alpha_acc[arc.src] + acc[id(arc)] + after_acc
                                          - expected)
        for k, tid in enumerate(arc.tids):
            _add(sums[fb.times[arc.src] + k], tid, signed)
    return _merged(sums), float(expected)


def posterior_text(key: str, post: Posterior) -> str:
    """One utterance of a Kaldi text Posterior archive, byte for byte as WritePosterior
    writes it: ``key [ tid p tid p ] [ ... ] `` (a Kaldi text stream's seven significant
    digits)."""
    frames = "".join("[ " + "".join(f"{t} {p:.7g} " for t, p in f) + "] " for f in post)
    return f"{key} {frames}\n"


def pdf_posteriors(post: Posterior, tid_to_pdf: np.ndarray) -> Iterable[dict[int, float]]:
    """Per frame, the posteriors summed by pdf (post-to-pdf-post)."""
    for frame in post:
        by_pdf: dict[int, float] = {}
        for tid, p in frame:
            pdf = int(tid_to_pdf[tid])
            by_pdf[pdf] = by_pdf.get(pdf, 0.0) + p
        yield by_pdf
