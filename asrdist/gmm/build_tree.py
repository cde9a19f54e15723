"""Decision-tree state tying (Kaldi's build-tree), on statistics from asrdist.gmm.tree_stats.

As BuildTree in Kaldi's tree/build-tree.cc:
1. a stub tree gives each root of roots.int its leaves: one per phone set when "shared" (the
   HMM states may then be split apart by pdf-class questions), one per pdf-class otherwise;
2. greedy splitting: the leaf whose best question (over every key and question) gains most
   likelihood is split, until ``max_leaves`` or the best gain is below ``thresh``; roots
   marked "not-split" keep their stub leaves;
3. bottom-up clustering merges leaves of one root whose merge loses at most
   ``cluster_thresh`` (by default the smallest gain of any split made), then more merges
   round the count down to a multiple of 8;
4. the leaves, the pdf-ids, are renumbered 0 .. L-1.
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.gmm.questions import Questions
from asrdist.gmm.tree_stats import TreeStats, gauss_objf
from asrdist.hmm.event_map import (
    PDF_CLASS,
    EventMap,
    Leaf,
    Split,
    Table,
    leaves,
    lookup,
    renumber,
    replace_leaves,
)


@dataclass(frozen=True)
class Root:
    """One line of phones/roots.int."""

    phones: tuple[int, ...]
    shared: bool
    split: bool


@dataclass(frozen=True)
class TreeOptions:
    """build-tree's options (train_deltas.sh passes --max-leaves and --cluster-thresh -1)."""

    max_leaves: int
    thresh: float = 300.0
    cluster_thresh: float = -1.0  # negative: the smallest split's gain
    round_num_leaves: bool = True
    width: int = 3
    central: int = 1


@dataclass
class TreeSummary:
    """What build-tree logs: splits, likelihood gains per frame, leaves removed."""

    stub_leaves: int
    splits: int
    split_gain_per_frame: float
    clustered_away: int
    leaves: int
    frames: float


def read_roots(path: Path) -> list[Root]:
    """phones/roots.int: "shared|not-shared split|not-split phone..." per line."""
    roots = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 3 or fields[0] not in ("shared", "not-shared") \
                or fields[1] not in ("split", "not-split"):
            raise AsrdistError(f"{path}:{n}: expected 'shared|not-shared split|not-split "
                               f"PHONES', got {line!r}")
        try:
            phones = tuple(sorted(int(p) for p in fields[2:]))
        except ValueError as e:
            raise AsrdistError(f"{path}:{n}: phones must be integers ({e})") from e
        roots.append(Root(phones, fields[0] == "shared", fields[1] == "split"))
    return roots


def stub_map(roots: list[Root], num_pdf_classes: dict[int, int], central: int,
             counter: itertools.count) -> EventMap:
    """GetStubMap: a table on the centre phone when every root is one phone, else a split
    on the first half of the roots' phones; a shared root is one leaf, an unshared one a
    table of leaves on the pdf-class."""
    if len(roots) == 1:
        root = roots[0]
        if root.shared:
            return Leaf(next(counter))
        length = max(num_pdf_classes[p] for p in root.phones)
        return Table(PDF_CLASS, tuple(Leaf(next(counter)) for _ in range(length)))
    highest = max(p for r in roots for p in r.phones)
    if all(len(r.phones) == 1 for r in roots) and len(roots) <= 2 * highest:
        table: list[EventMap | None] = [None] * (highest + 1)
        for r in roots:
            table[r.phones[0]] = stub_map([r], num_pdf_classes, central, counter)
        return Table(central, tuple(table))
    half = len(roots) // 2
    first = stub_map(roots[:half], num_pdf_classes, central, counter)
    second = stub_map(roots[half:], num_pdf_classes, central, counter)
    return Split(central, frozenset(p for r in roots[:half] for p in r.phones), first, second)


@dataclass
class _Node:
    """A leaf being split: its events and its best question."""

    leaf: int
    idx: np.ndarray
    gain: float = 0.0
    key: int = 0
    yes_set: frozenset[int] = frozenset()
    children: tuple[_Node, _Node] | None = None

    def event_map(self) -> EventMap:
        if self.children is None:
            return Leaf(self.leaf)
        yes, no = self.children
        return Split(self.key, self.yes_set, yes.event_map(), no.event_map())


@dataclass
class _Events:
    """The statistics as arrays: rows, and each key's value per event (-1: absent)."""

    rows: np.ndarray
    values: dict[int, np.ndarray]
    events: list[dict[int, int]] = field(default_factory=list)

    @classmethod
    def of(cls, stats: TreeStats, keys: list[int]) -> _Events:
        events, rows = stats.keys_and_rows()
        dicts = [dict(e) for e in events]
        values = {k: np.array([d.get(k, -1) for d in dicts], dtype=np.int64) for k in keys}
        return cls(rows, values, dicts)


def _best_question(node: _Node, ev: _Events, questions: Questions) -> None:
    """FindBestSplit: the question (on a key every event of the node has) gaining most."""
    node.gain = 0.0
    if len(node.idx) <= 1:
        return
    rows = ev.rows[node.idx]
    total = rows.sum(axis=0)
    whole = gauss_objf(total)[0]
    for key in sorted(questions.by_key):
        qs = questions.by_key[key]
        vals = ev.values[key][node.idx]
        if not qs or vals.min() < 0:
            continue
        size = max(vals.max() + 1, max(max(q) for q in qs) + 1)
        per_value = np.zeros((size, rows.shape[1]))
        np.add.at(per_value, vals, rows)
        member = np.zeros((len(qs), size))
        for i, q in enumerate(qs):
            member[i, sorted(q)] = 1.0
        yes = member @ per_value
        gains = gauss_objf(yes) + gauss_objf(total[None, :] - yes) - whole
        best = int(np.argmax(gains))
        if gains[best] > node.gain:
            node.gain, node.key, node.yes_set = float(gains[best]), key, qs[best]


def _split(stub: EventMap, ev: _Events, questions: Questions, opts: TreeOptions,
           splittable: np.ndarray, num_leaves: int) -> tuple[EventMap, int, float, float, int]:
    """SplitDecisionTree over the stub's leaves: the split tree, its leaf count, the summed
    and the smallest gain of the splits made, and how many were made."""
    stub_leaf = np.array([lookup(stub, e) for e in ev.events], dtype=np.int64)
    nodes = {}
    for leaf in sorted(set(stub_leaf[splittable].tolist())):
        node = _Node(leaf, np.flatnonzero((stub_leaf == leaf) & splittable))
        _best_question(node, ev, questions)
        nodes[leaf] = node
    heap = [(-n.gain, n.leaf, n) for n in nodes.values()]
    heapq.heapify(heap)
    tiebreak = itertools.count()
    total_gain, smallest, splits = 0.0, math.inf, 0
    while heap and -heap[0][0] > opts.thresh and num_leaves < opts.max_leaves:
        _, _, node = heapq.heappop(heap)
        total_gain += node.gain
        smallest = min(smallest, node.gain)
        mask = np.isin(ev.values[node.key][node.idx], sorted(node.yes_set))
        yes = _Node(node.leaf, node.idx[mask])
        no = _Node(num_leaves, node.idx[~mask])
        num_leaves += 1
        splits += 1
        node.children = (yes, no)
        for child in node.children:
            _best_question(child, ev, questions)
            heapq.heappush(heap, (-child.gain, next(tiebreak), child))
    tree = replace_leaves(stub, lambda a: nodes[a].event_map() if a in nodes else Leaf(a))
    return tree, num_leaves, total_gain, smallest, splits


def _merge(groups: list[tuple[list[int], np.ndarray]], thresh: float,
           target: int) -> dict[int, int]:
    """Bottom-up clustering inside each group of leaves (ClusterBottomUp and its
    compartmentalised form): merge the cheapest pair anywhere while the likelihood lost is
    at most ``thresh`` and more than ``target`` clusters remain. Returns leaf -> kept leaf."""
    mapping: dict[int, int] = {}
    state = []
    for members, rows in groups:
        rows = rows.copy()
        n = len(members)
        cost = np.full((n, n), np.inf)
        for i in range(n):
            cost[i, i + 1:] = (gauss_objf(rows[i])[0] + gauss_objf(rows[i + 1:])
                               - gauss_objf(rows[i] + rows[i + 1:]))
        state.append([list(members), rows, cost, np.ones(n, dtype=bool)])
        for leaf in members:
            mapping[leaf] = leaf
    alive = sum(len(s[0]) for s in state)
    while alive > target:
        best = min(((s[2].min(), g) for g, s in enumerate(state) if s[2].size), default=None)
        # at most the threshold, as Kaldi's BottomUpClusterer (its float objectives make the
        # smallest split's own two leaves cost exactly that split's gain: they merge back)
        if best is None or not best[0] <= thresh + 1e-6 * abs(thresh):
            break
        members, rows, cost, live = state[best[1]]
        i, j = np.unravel_index(np.argmin(cost), cost.shape)
        rows[i] += rows[j]
        live[j] = False
        cost[j, :] = cost[:, j] = np.inf
        for k in np.flatnonzero(live):
            if k != i:
                a, b = min(i, k), max(i, k)
                cost[a, b] = (gauss_objf(rows[i])[0] + gauss_objf(rows[k])[0]
                              - gauss_objf(rows[i] + rows[k])[0])
        for leaf, kept in mapping.items():
            if kept == members[j]:
                mapping[leaf] = members[i]
        alive -= 1
    return mapping


def _cluster_groups(tree: EventMap, stub: EventMap, ev: _Events) -> list[tuple[list[int],
                                                                                np.ndarray]]:
    """The split tree's leaves with their summed statistics, grouped by stub leaf (root)."""
    leaf_of = np.array([lookup(tree, e) for e in ev.events], dtype=np.int64)
    root_of = np.array([lookup(stub, e) for e in ev.events], dtype=np.int64)
    groups = []
    for root in sorted(set(root_of.tolist())):
        in_root = root_of == root
        members = sorted(set(leaf_of[in_root].tolist()))
        rows = np.stack([ev.rows[in_root & (leaf_of == leaf)].sum(axis=0) for leaf in members])
        groups.append((members, rows))
    return groups


def build_tree(stats: TreeStats, roots: list[Root], questions: Questions,
               num_pdf_classes: dict[int, int], opts: TreeOptions) -> tuple[EventMap,
                                                                           TreeSummary]:
    """The tied-state tree: leaves are pdf-ids 0 .. L-1."""
    if not stats.events:
        raise AsrdistError("no tree statistics: were any utterances aligned?")
    if opts.max_leaves < 1:
        raise AsrdistError(f"--num-leaves {opts.max_leaves}: must be positive")
    covered = sorted(p for r in roots for p in r.phones)
    if len(covered) != len(set(covered)):
        raise AsrdistError("phones/roots.int names a phone in more than one root")
    counter = itertools.count()
    stub = stub_map(roots, num_pdf_classes, opts.central, counter)
    stub_leaves = next(counter)
    ev = _Events.of(stats, sorted(questions.by_key))
    unknown = set(ev.values[opts.central].tolist()) - set(covered)
    if unknown:
        raise AsrdistError(f"tree statistics hold phones {sorted(unknown)} that no root covers")
    no_split = {p for r in roots if not r.split for p in r.phones}
    splittable = ~np.isin(ev.values[opts.central], sorted(no_split))
    tree, num_leaves, gain, smallest, splits = _split(stub, ev, questions, opts, splittable,
                                                      stub_leaves)
    cluster_thresh = opts.cluster_thresh if opts.cluster_thresh >= 0 else smallest
    if cluster_thresh != 0.0 and math.isfinite(cluster_thresh):
        mapping = _merge(_cluster_groups(tree, stub, ev), cluster_thresh, 0)
        tree = replace_leaves(tree, lambda a: Leaf(mapping.get(a, a)))
    if opts.round_num_leaves:
        count = len(set(leaves(tree)))
        mapping = _merge(_cluster_groups(tree, stub, ev), math.inf, (count // 8) * 8 or count)
        tree = replace_leaves(tree, lambda a: Leaf(mapping.get(a, a)))
    tree, num_tied = renumber(tree)
    frames = float(ev.rows[:, 0].sum())
    return tree, TreeSummary(stub_leaves, splits, gain / max(frames, 1.0),
                             num_leaves - num_tied, num_tied, frames)
