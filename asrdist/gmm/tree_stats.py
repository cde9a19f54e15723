"""Decision-tree statistics (Kaldi's acc-tree-stats) and the Gaussian objective trees grow by.

Every frame of an alignment is an event: its pdf-class and the phones of its context window
(left, centre, right for triphones). A context-independent phone (silence, ``ci_phones``)
records only its centre, so no question about its neighbours can split it. Each event keeps
the count, sum and sum of squares of its frames' features: a single diagonal Gaussian's
sufficient statistics, whose log-likelihood (GaussClusterable::Objf, variance floor 0.01 as
acc-tree-stats') is what splitting and clustering maximise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from asrdist.hmm.event_map import PDF_CLASS
from asrdist.hmm.phone_ali import TransitionTable, split_to_phones

VAR_FLOOR = 0.01
Event = tuple[tuple[int, int], ...]  # sorted (key, value) pairs, as Kaldi's EventType


def gauss_objf(stats: np.ndarray, var_floor: float = VAR_FLOOR) -> np.ndarray:
    """Log-likelihood of each row's frames under its own ML diagonal Gaussian.

    A row is [count, sum (dim), sum of squares (dim)]; rows with no count give 0.
    """
    stats = np.atleast_2d(stats)
    dim = (stats.shape[1] - 1) // 2
    count = stats[:, 0]
    safe = np.where(count > 0, count, 1.0)[:, None]
    mean = stats[:, 1:dim + 1] / safe
    var = stats[:, dim + 1:] / safe - mean * mean
    floored = np.maximum(var, var_floor)
    per_frame = (-0.5 * (var / floored).sum(axis=1)
                 - 0.5 * (np.log(floored).sum(axis=1) + dim * math.log(2 * math.pi)))
    return np.where(count > 0, per_frame * count, 0.0)


@dataclass
class TreeStats:
    """Statistics per event; ``+`` sums those of parallel jobs (sum-tree-stats)."""

    events: dict[Event, np.ndarray]
    dim: int

    def __add__(self, other: TreeStats) -> TreeStats:
        events = {e: s.copy() for e, s in self.events.items()}
        for e, s in other.events.items():
            if e in events:
                events[e] += s
            else:
                events[e] = s.copy()
        return TreeStats(events, self.dim or other.dim)

    def keys_and_rows(self) -> tuple[list[Event], np.ndarray]:
        """Events in sorted order beside their statistics as one matrix."""
        keys = sorted(self.events)
        rows = np.stack([self.events[k] for k in keys]) if keys else np.zeros((0, 1 + 2 * self.dim))
        return keys, rows


def accumulate_tree_stats(
    table: TransitionTable,
    utterances: Iterable[tuple[str, np.ndarray, np.ndarray]],
    ci_phones: set[int],
    width: int = 3,
    central: int = 1,
) -> TreeStats:
    """acc-tree-stats over (utterance id, features, transition-ids) triples."""
    events: dict[Event, np.ndarray] = {}
    dim = 0
    for utt, feats, tids in utterances:
        dim = feats.shape[1]
        segs = split_to_phones(table, tids, utt)
        ctx = segs.context(width, central)[segs.frame_instance()]
        ci = np.isin(ctx[:, central], list(ci_phones))
        ctx[ci] = -1  # a context-independent phone records only its centre
        ctx[ci, central] = segs.phones[segs.frame_instance()[ci]]
        keys = np.concatenate([table.pdf_class[tids][:, None], ctx], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        x = feats.astype(np.float64)
        sums = np.zeros((len(uniq), 1 + 2 * dim))
        np.add.at(sums, inverse.ravel(), np.concatenate([np.ones((len(x), 1)), x, x * x], axis=1))
        for key, row in zip(uniq.tolist(), sums, strict=True):
            event = ((PDF_CLASS, key[0]),) + tuple(
                (pos, v) for pos, v in enumerate(key[1:]) if v >= 0)
            if event in events:
                events[event] += row
            else:
                events[event] = row
    return TreeStats(events, dim)
