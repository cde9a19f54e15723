"""Bipartite ring schedules for ADPSGD: who averages with whom, as pure functions.

Learners (or super-learners) are numbered 0..n-1. Roles are fixed for a whole run: odd indices
are *active* (they start every exchange), even indices are *passive* (they only serve). Roles
never change, so each learner runs exactly one kind of communication loop on one process group,
and no two learners can wait on each other: an active learner waits only on a passive one, and a
passive one waits on nobody (it serves whichever request comes first). That is the deadlock
freedom of the bipartite ring, as in Lian et al. 2018.

Odd n: a ring of odd length cannot be bipartite. Its one edge joining two passive learners
(n-1 -- 0) is simply never used, because passive learners never start an exchange; what remains
is a bipartite *path* through every learner, still connected, so all weights still converge to
the common mean. No learner has to sit out a round.

- fixed: ring order 0, 1, ..., n-1; an active learner alternates between its left neighbour (even
  rounds) and its right one (odd rounds); always the same neighbour would split the ring into
  disconnected pairs.
- random: every round the ring is redrawn from ``(seed, round)``: passive and active learners are
  each shuffled and interleaved (p a p a ...), so the ring stays bipartite; a coin drawn from
  the same seed sends every active learner to its left or every one to its right neighbour, so
  a round is a matching (no passive learner is asked twice while another sits idle). Every learner
  computes the same ring from the shared seed, so no message is needed to agree on it.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np


def is_active(index: int) -> bool:
    """Active learners (odd indices) start exchanges; passive ones (even) serve them."""
    return index % 2 == 1


def keeping_roles(ring: list[int], gone: Collection[int]) -> list[int]:
    """The members of ``ring`` (in ring order, roles by position) not in ``gone``, ordered so
    that as few as possible change role: the passive and the active ones interleaved, each in
    their order (elastic runs' ring after a departure). Numbering the survivors in order instead
    would flip every member after a lost one: a learner that was passive, and so never waited,
    turns active with a partner that may have finished its steps already. Only where one role
    runs out do the rest of the other take its positions (losing a passive member of an even
    ring flips one active member)."""
    passive = [m for i, m in enumerate(ring) if not is_active(i) and m not in gone]
    active = [m for i, m in enumerate(ring) if is_active(i) and m not in gone]
    left = {False: iter(passive), True: iter(active)}
    order: list[int] = []
    for pos in range(len(passive) + len(active)):
        member = next(left[is_active(pos)], None)  # that role run out: the other's next
        order.append(member if member is not None else next(left[not is_active(pos)]))
    return order


def actives(n: int) -> list[int]:
    return [i for i in range(n) if is_active(i)]


def passives(n: int) -> list[int]:
    return [i for i in range(n) if not is_active(i)]


def _neighbours(ring: list[int], pos: int) -> tuple[int, int]:
    """Left and right neighbours of the active learner at ``pos`` (odd) of a bipartite ring."""
    n = len(ring)
    return ring[pos - 1], ring[(pos + 1) % n]


def fixed_partner(index: int, n: int, round_: int) -> int:
    """The passive partner of active learner ``index`` in ``round_`` of the fixed ring."""
    if not is_active(index) or index >= n:
        raise ValueError(f"learner {index} of {n} is not active")
    left, right = _neighbours(list(range(n)), index)
    return left if round_ % 2 == 0 else right


def random_ring(seed: int, round_: int, n: int) -> list[int]:
    """The ring of ``round_``: shuffled passive and active learners, interleaved."""
    rng = np.random.default_rng([seed, round_])
    pas = rng.permutation(passives(n)).tolist()
    act = rng.permutation(actives(n)).tolist()
    ring: list[int] = []
    for k, p in enumerate(pas):
        ring.append(p)
        if k < len(act):
            ring.append(act[k])
    return ring


def random_partner(index: int, n: int, round_: int, seed: int) -> int:
    """The passive partner of active learner ``index`` in ``round_`` of the random ring."""
    if not is_active(index) or index >= n:
        raise ValueError(f"learner {index} of {n} is not active")
    ring = random_ring(seed, round_, n)
    pos = ring.index(index)
    # One side for the whole round, from its own stream: every active learner then takes a
    # different passive one (a matching), as the alternating fixed ring does.
    side = np.random.default_rng([seed, round_, 1]).integers(0, 2)
    left, right = _neighbours(ring, pos)
    return left if side == 0 else right


def partner(kind: str, index: int, n: int, round_: int, seed: int = 0) -> int:
    """Dispatch on ``kind`` ("fixed" or "random")."""
    if kind == "fixed":
        return fixed_partner(index, n, round_)
    if kind == "random":
        return random_partner(index, n, round_, seed)
    raise ValueError(f"unknown ring kind {kind!r}")


def round_pairs(kind: str, n: int, round_: int, seed: int = 0) -> list[tuple[int, int]]:
    """(active, passive) pairs of one round: each active learner's exchange."""
    return [(a, partner(kind, a, n, round_, seed)) for a in actives(n)]


def expected_mixing_gap(kind: str, n: int, rounds: int = 64, seed: int = 0) -> float:
    """Spectral gap 1 - lambda_2 of the mean over rounds of W^T W, W one round's averaging.

    A round's exchanges run one after another (a passive learner hit twice serves in turn), so W
    is the product of the pairwise averaging matrices. A larger gap means faster consensus.
    """
    acc = np.zeros((n, n))
    for r in range(rounds):
        w = np.eye(n)
        for a, p in round_pairs(kind, n, r, seed):
            step = np.eye(n)
            step[[a, a, p, p], [a, p, a, p]] = 0.5
            w = step @ w
        acc += w.T @ w
    eig = np.sort(np.linalg.eigvalsh(acc / rounds))[::-1]
    return float(1.0 - eig[1])
