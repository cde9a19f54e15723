"""A compact lattice as flat arrays, and its forward-backward vectorised over them: what a
sequence-training step computes once per utterance.

:mod:`asrdist.decode.lattice_post` is the reference (Kaldi's lattice-to-post and
lattice-to-smbr-post to the printed digit, state by state in Python); here the same sums run
level by level: the arcs are grouped by the depth of their source state (the longest arc
path from the start), so every arc of a group reads forward scores that are complete, and one
numpy call per group does them all. A compact lattice's arcs span words, so a lattice has a few
dozen levels however many frames it covers. Final weights are arcs into one super-final state.
Scores are in double precision, without Kaldi's float rounding of scaled weights (the
reference keeps that; the two agree to ~1e-6).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asrdist.decode.lattice import CompactLattice, top_order
from asrdist.errors import AsrdistError


@dataclass(frozen=True)
class LatticeArrays:
    """Arcs sorted by their source state's level; ``bounds[k]:bounds[k + 1]`` is level k's.
    ``dst`` of a final weight is ``final`` (the super-final state); ``elem_*``: every
    transition-id of every arc's string, with its arc and frame."""

    start: int
    final: int  # = number of states; the super-final state's index
    src: np.ndarray
    dst: np.ndarray
    graph: np.ndarray  # float64 graph costs
    acoustic: np.ndarray  # float64 acoustic costs as the lattice stores them
    bounds: np.ndarray
    elem_arc: np.ndarray
    elem_t: np.ndarray
    elem_tid: np.ndarray
    frames: int

    @property
    def num_arcs(self) -> int:
        return len(self.src)


def lattice_arrays(clat: CompactLattice) -> LatticeArrays:
    """``clat`` as arrays; a lattice whose paths reach a state at different frames is not
    one decoding's (Kaldi's CompactLatticeStateTimes asserts the same)."""
    n = clat.num_states
    if n == 0:
        raise AsrdistError("an empty lattice has no paths")
    order = top_order([[a[3] for a in arcs] for arcs in clat.arcs])
    level = [-1] * n
    times: list[int | None] = [None] * n
    level[clat.start], times[clat.start] = 0, 0
    arcs: list[tuple[int, int, float, tuple[int, ...], float]] = []
    for s in order:
        if level[s] < 0:
            continue  # not reachable from the start: on no path
        for _, (graph, acoustic), tids, nxt in clat.arcs[s]:
            t = times[s] + len(tids)
            if times[nxt] is None:
                times[nxt] = t
            elif times[nxt] != t:
                raise AsrdistError(f"lattice state {nxt} is reached after {times[nxt]} and "
                                   f"{t} frames")
            level[nxt] = max(level[nxt], level[s] + 1)
            arcs.append((s, nxt, float(graph), tuple(tids), float(acoustic)))
        final = clat.final[s]
        if final is not None and np.isfinite(final[0][0]):
            arcs.append((s, n, float(final[0][0]), tuple(final[1]), float(final[0][1])))
    if not any(a[1] == n for a in arcs):
        raise AsrdistError("the lattice has no complete path")
    arcs.sort(key=lambda a: level[a[0]])
    src = np.fromiter((a[0] for a in arcs), np.int32, len(arcs))
    lengths = np.fromiter((len(a[3]) for a in arcs), np.int64, len(arcs))
    starts = np.asarray([times[s] for s in src.tolist()], dtype=np.int64)
    elem_arc = np.repeat(np.arange(len(arcs), dtype=np.int32), lengths)
    elem_t = starts[elem_arc] + np.arange(len(elem_arc)) - np.repeat(np.cumsum(lengths) - lengths,
                                                                    lengths)
    levels = np.asarray([level[s] for s in src.tolist()], dtype=np.int64)
    return LatticeArrays(
        start=clat.start, final=n, src=src,
        dst=np.fromiter((a[1] for a in arcs), np.int32, len(arcs)),
        graph=np.fromiter((a[2] for a in arcs), np.float64, len(arcs)),
        acoustic=np.fromiter((a[4] for a in arcs), np.float64, len(arcs)),
        bounds=np.searchsorted(levels, np.arange(levels.max() + 2)),
        elem_arc=elem_arc, elem_t=elem_t.astype(np.int32),
        elem_tid=np.fromiter((t for a in arcs for t in a[3]), np.int32, len(elem_arc)),
        frames=int(elem_t.max()) + 1 if len(elem_t) else 0)


@dataclass(frozen=True)
class ForwardBackward:
    """Log-semiring scores of every state (the super-final last) and each arc's posterior."""

    alpha: np.ndarray
    beta: np.ndarray
    total: float  # log of the sum over paths of exp(-cost)
    posterior: np.ndarray  # per arc


def forward_backward(lat: LatticeArrays, cost: np.ndarray) -> ForwardBackward:
    """Forward and backward over ``cost`` (per arc: graph + kappa * acoustic)."""
    alpha = np.full(lat.final + 1, -np.inf)
    alpha[lat.start] = 0.0
    levels = list(zip(lat.bounds[:-1].tolist(), lat.bounds[1:].tolist(), strict=True))
    for a, b in levels:
        np.logaddexp.at(alpha, lat.dst[a:b], alpha[lat.src[a:b]] - cost[a:b])
    total = float(alpha[lat.final])
    if not np.isfinite(total):
        raise AsrdistError("the lattice has no complete path")
    beta = np.full(lat.final + 1, -np.inf)
    beta[lat.final] = 0.0
    for a, b in reversed(levels):
        np.logaddexp.at(beta, lat.src[a:b], beta[lat.dst[a:b]] - cost[a:b])
    posterior = np.exp(alpha[lat.src] - cost + beta[lat.dst] - total)
    return ForwardBackward(alpha, beta, total, posterior)


def arc_costs(lat: LatticeArrays, scores: np.ndarray, tid_to_pdf: np.ndarray,
              kappa: float, graph: np.ndarray | None = None) -> np.ndarray:
    """Each arc's cost with the acoustics of ``scores`` (frames x pdfs log-likelihoods):
    graph minus kappa times the sum of its frames' scores (lattice-rescore-mapped, then
    ScaleLattice)."""
    if lat.frames > scores.shape[0]:
        raise AsrdistError(f"the lattice runs past the scores' {scores.shape[0]} frames")
    elem = scores[lat.elem_t, tid_to_pdf[lat.elem_tid]]
    acoustic = np.bincount(lat.elem_arc, weights=elem, minlength=lat.num_arcs)
    return (lat.graph if graph is None else graph) - kappa * acoustic


def occupancies(lat: LatticeArrays, fb: ForwardBackward, tid_to_pdf: np.ndarray,
                shape: tuple[int, int], weights: np.ndarray | None = None) -> np.ndarray:
    """Per frame and pdf, the summed posteriors (or ``weights`` per arc) of the arcs whose
    strings hold that pdf at that frame."""
    out = np.zeros(shape, dtype=np.float64)
    per_arc = fb.posterior if weights is None else weights
    np.add.at(out, (lat.elem_t, tid_to_pdf[lat.elem_tid]), per_arc[lat.elem_arc])
    return out


def expected_accuracy(lat: LatticeArrays, fb: ForwardBackward, cost: np.ndarray,
                      accuracy: np.ndarray) -> tuple[float, np.ndarray]:
    """sMBR's expected accuracy (``accuracy``: per arc, its frames' summed accuracies) and
    each arc's signed posterior ``gamma * (accuracy through it - expected)``
    (LatticeForwardBackwardMpeVariants)."""
    levels = list(zip(lat.bounds[:-1].tolist(), lat.bounds[1:].tolist(), strict=True))
    forward = np.zeros(lat.final + 1)
    with np.errstate(invalid="ignore"):  # -inf - -inf on unreachable states: no weight
        step = np.exp(fb.alpha[lat.src] - cost - fb.alpha[lat.dst])
        back = np.exp(fb.beta[lat.dst] - cost - fb.beta[lat.src])
    step, back = np.nan_to_num(step), np.nan_to_num(back)
    for a, b in levels:
        np.add.at(forward, lat.dst[a:b], step[a:b] * (forward[lat.src[a:b]] + accuracy[a:b]))
    backward = np.zeros(lat.final + 1)
    for a, b in reversed(levels):
        np.add.at(backward, lat.src[a:b], back[a:b] * (backward[lat.dst[a:b]] + accuracy[a:b]))
    expected = float(forward[lat.final])
    through = forward[lat.src] + accuracy + backward[lat.dst]
    return expected, fb.posterior * (through - expected)
