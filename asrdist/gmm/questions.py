"""Questions for the tree (Kaldi's cluster-phones and compile-questions).

Phone questions come from clustering: each phone set's statistics for the central HMM state
(pdf-class 1) are pooled, and the sets are split top-down, always splitting the cluster whose
best 2-way split gains most likelihood, until every cluster is one phone set (TreeCluster with
2-means inside, 10 random starts as cluster-phones). Every cluster of that hierarchy is a
question, with each phone set alone and the lang's extra questions. The same phone questions
are asked of every context position; the pdf-class is asked "is it <= p?" for each p.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.gmm.tree_stats import TreeStats, gauss_objf
from asrdist.hmm.event_map import PDF_CLASS

KMEANS_TRIES = 10


@dataclass(frozen=True)
class Questions:
    """Candidate yes-sets per event key (compile-questions' output)."""

    by_key: dict[int, list[frozenset[int]]]


def _two_means(points: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    """The best 2-way partition of ``points`` (rows of Gaussian statistics) found from
    KMEANS_TRIES random starts, and its likelihood gain over one cluster."""
    whole = float(gauss_objf(points.sum(axis=0))[0])
    best, best_gain = np.zeros(len(points), dtype=int), -np.inf
    for _ in range(KMEANS_TRIES):
        assign = rng.permutation(np.arange(len(points)) % 2)
        for _ in range(100):
            sums = np.stack([points[assign == c].sum(axis=0) for c in (0, 1)])
            moved = False
            for i in range(len(points)):
                own = assign[i]
                if (assign == own).sum() == 1:
                    continue
                other = 1 - own
                without = sums[own] - points[i]
                gain_stay = gauss_objf(sums[own])[0] + gauss_objf(sums[other])[0]
                gain_move = gauss_objf(without)[0] + gauss_objf(sums[other] + points[i])[0]
                if gain_move > gain_stay + 1e-9:
                    assign[i] = other
                    sums[own], sums[other] = without, sums[other] + points[i]
                    moved = True
            if not moved:
                break
        gain = float(gauss_objf(sums).sum()) - whole
        if gain > best_gain:
            best, best_gain = assign.copy(), gain
    return best, best_gain


def cluster_phones(stats: TreeStats, phone_sets: list[list[int]],
                   pdf_classes: tuple[int, ...] = (1,), seed: int = 0) -> list[list[int]]:
    """cluster-phones: phone-set questions from top-down clustering of the sets' statistics."""
    pooled = np.zeros((len(phone_sets), 1 + 2 * stats.dim))
    set_of = {p: i for i, s in enumerate(phone_sets) for p in s}
    for event, row in stats.events.items():
        e = dict(event)
        if e[PDF_CLASS] in pdf_classes and e[1] in set_of:
            pooled[set_of[e[1]]] += row
    if (pooled[:, 0] > 0).sum() < 2:
        raise AsrdistError("tree statistics cover fewer than two phone sets: nothing to cluster "
                           "(too little data, or alignments of another lang?)")
    rng = np.random.default_rng(seed)
    clusters: list[list[int]] = [list(range(len(phone_sets)))]
    found: list[list[int]] = [clusters[0]]
    splits: dict[int, tuple[np.ndarray, float]] = {}
    while True:
        for c, members in enumerate(clusters):
            if c not in splits and len(members) > 1:
                splits[c] = _two_means(pooled[members], rng)
        if not splits:
            break
        c = max(splits, key=lambda k: splits[k][1])
        assign, _ = splits.pop(c)
        members = clusters[c]
        clusters[c] = [m for m, a in zip(members, assign, strict=True) if a == 0]
        clusters.append([m for m, a in zip(members, assign, strict=True) if a == 1])
        found += [clusters[c], clusters[-1]]
    questions, seen = [], set()
    for members in found + [[i] for i in range(len(phone_sets))]:
        q = tuple(sorted(p for m in members for p in phone_sets[m]))
        if q and q not in seen:
            seen.add(q)
            questions.append(list(q))
    return questions


def compile_questions(phone_questions: list[list[int]], max_pdf_classes: int,
                      width: int = 3) -> Questions:
    """compile-questions: the phone questions for every position, pdf-class <= p questions."""
    phone_qs = sorted({frozenset(q) for q in phone_questions if q}, key=sorted)
    by_key: dict[int, list[frozenset[int]]] = {pos: phone_qs for pos in range(width)}
    by_key[PDF_CLASS] = [frozenset(range(p + 1)) for p in range(max_pdf_classes - 1)]
    return Questions(by_key)
