"""Kaldi's LatticeWeight (fstext/lattice-weight.h): a (graph, acoustic) cost pair in
float32, and the semiring arithmetic every lattice algorithm here computes with, as Kaldi
computes it (so that ties and float32 sums come out as Kaldi's do).
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32
Weight = tuple[np.float32, np.float32]  # (graph cost, acoustic cost), Kaldi's LatticeWeight
ONE: Weight = (F32(0.0), F32(0.0))
ZERO: Weight = (F32(np.inf), F32(np.inf))
DELTA = F32(1.0 / 1024)  # fst::kDelta, DeterminizeLatticePhonePrunedOptions' delta


def is_zero(w: Weight) -> bool:
    return bool(w[0] == ZERO[0] and w[1] == ZERO[1])


def times(a: Weight, b: Weight) -> Weight:
    return (a[0] + b[0], a[1] + b[1])


def compare(a: Weight, b: Weight) -> int:
    """fst::Compare: 1 when a is better (lower cost), -1 when worse, ties on the graph cost."""
    fa, fb = a[0] + a[1], b[0] + b[1]
    if fa < fb:
        return 1
    if fa > fb:
        return -1
    if a[0] < b[0]:
        return 1
    if a[0] > b[0]:
        return -1
    return 0


def plus(a: Weight, b: Weight) -> Weight:
    return a if compare(a, b) >= 0 else b


def divide(a: Weight, b: Weight) -> Weight:
    v1, v2 = a[0] - b[0], a[1] - b[1]
    if math.isinf(v1) or math.isinf(v2):
        return ZERO
    return (v1, v2)


def cost(w: Weight) -> float:
    """ConvertToCost: the total cost, summed in double."""
    return float(w[0]) + float(w[1])


def approx_equal(a: Weight, b: Weight) -> bool:
    if a[0] == b[0] and a[1] == b[1]:
        return True
    return bool(abs((a[0] + a[1]) - (b[0] + b[1])) <= DELTA)


def compare_with_strings(aw: Weight, astr: tuple[int, ...], bw: Weight,
                          bstr: tuple[int, ...]) -> int:
    """The determinizer's Compare: weights first, then the shorter string, then the smaller."""
    c = compare(aw, bw)
    if c or astr == bstr:
        return c
    if len(astr) != len(bstr):
        return -1 if len(astr) > len(bstr) else 1
    return -1 if astr < bstr else 1
