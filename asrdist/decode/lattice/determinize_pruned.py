"""Kaldi's pruned lattice determinization (lat/determinize-lattice-pruned.cc), decoding's:
:func:`determinize_lattice_phone_pruned` ports ``DeterminizeLatticePhonePrunedWrapper`` step
by step (invert, top-sort and arc-sort the raw lattice; phone labels inserted at phone starts;
a pruned determinization on words + phones; phones deleted; a second on words, giving a compact
lattice; connect). The task queue is libstdc++'s binary heap, so ties resolve as Kaldi's do and
the output states come out numbered as Kaldi numbers them. Not ported: the memory limit
(--max-mem, 50 MB: past it Kaldi prunes harder and retries).
"""

from __future__ import annotations

import heapq
import itertools
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asrdist.decode.lattice.fst import (
    Arc,
    CompactLattice,
    Lattice,
    connect_compact,
    top_order,
    top_sort,
)
from asrdist.decode.lattice.weights import (
    ONE,
    ZERO,
    Weight,
    approx_equal,
    compare_with_strings,
    cost,
    divide,
    is_zero,
    plus,
    times,
)

if TYPE_CHECKING:
    from asrdist.kaldi.transition_model import TransitionInfo

Element = tuple[int, tuple[int, ...], Weight]  # input state, string, weight


_state_of = operator.itemgetter(0)  # an element's input state; an arc's input label


def normalize_subset(subset: list[Element]) -> tuple[list[Element], Weight, tuple[int, ...]]:
    """Kaldi's NormalizeSubset (both determinizers'): the subset's total weight and the
    longest string its elements share, divided out of each element."""
    weight, prefix = subset[0][2], subset[0][1]
    for e in subset[1:]:
        weight = plus(weight, e[2])
        n = 0
        for a, b in zip(prefix, e[1], strict=False):
            if a != b:
                break
            n += 1
        prefix = prefix[:n]
    k = len(prefix)
    return [(e[0], e[1][k:], divide(e[2], weight)) for e in subset], weight, prefix


def compact_output(out_arcs: list[list[tuple]]) -> CompactLattice:
    """Both determinizers' Output(MutableFst<CompactArc>*): a state per output state (start
    0), from its arcs (label, string, next, weight); one with no next state is its final."""
    out = CompactLattice([[] for _ in out_arcs], [None] * len(out_arcs), 0)
    for s, arcs in enumerate(out_arcs):
        for label, string, nxt, weight in arcs:
            if nxt is None:
                out.final[s] = (weight, string)
            else:
                out.arcs[s].append((label, weight, string, nxt))
    return out


class _TaskQueue:
    """std::priority_queue<Task*> with TaskCompare (lowest cost on top), libstdc++'s heap, so
    that tasks of equal cost are taken in Kaldi's order."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, list[Element]]] = []

    def push(self, task: tuple[float, int, int, list[Element]]) -> None:
        h = self.heap
        h.append(task)
        self._push_up(len(h) - 1, 0, task)

    def _push_up(self, hole: int, top: int, value: tuple) -> None:
        h = self.heap
        parent = (hole - 1) // 2
        while hole > top and h[parent][0] > value[0]:
            h[hole] = h[parent]
            hole = parent
            parent = (hole - 1) // 2
        h[hole] = value

    def pop(self) -> tuple[float, int, int, list[Element]]:
        h = self.heap
        top = h[0]
        last = h.pop()
        n = len(h)
        if n:
            hole, second = 0, 0
            while second < (n - 1) // 2:
                second = 2 * (second + 1)
                if h[second][0] > h[second - 1][0]:
                    second -= 1
                h[hole] = h[second]
                hole = second
            if n % 2 == 0 and second == (n - 2) // 2:
                second = 2 * (second + 1)
                h[hole] = h[second - 1]
                hole = second - 1
            self._push_up(hole, 0, last)
        return top

    def __bool__(self) -> bool:
        return bool(self.heap)


class _Determinizer:
    """LatticeDeterminizerPruned (input top-sorted). Its memory limit is not enforced, so the
    retry with a smaller beam that follows it in Kaldi never happens here."""

    def __init__(self, lat: Lattice, beam: float):
        self.lat = lat
        n = len(lat.arcs)
        back = [0.0] * n
        inf = ZERO[0]
        # per state: its input-epsilon arcs (olabel, weight, next) and its labelled arcs, both
        # without the arcs of weight Zero, which every step of the algorithm skips
        self.eps: list[list[tuple[int, Weight, int]]] = [[] for _ in range(n)]
        self.labelled: list[list[Arc]] = [[] for _ in range(n)]
        self.emitting = [False] * n
        finals, all_arcs, eps, labelled = lat.final, lat.arcs, self.eps, self.labelled
        for s in range(n - 1, -1, -1):
            f = finals[s]
            c = float(f[0]) + float(f[1])
            emitting = not (f[0] == inf and f[1] == inf)
            for arc in all_arcs[s]:
                w = arc[2]
                wc = float(w[0]) + float(w[1])  # inf whenever w is Zero
                if wc + back[arc[3]] < c:
                    c = wc + back[arc[3]]
                if wc == inf and w[0] == inf and w[1] == inf:
                    continue
                if arc[0]:
                    labelled[s].append(arc)
                    emitting = True
                else:
                    eps[s].append((arc[1], w, arc[3]))
            back[s] = c
            self.emitting[s] = emitting
        self.back = back
        self.cutoff = back[lat.start] + beam
        # per output state: minimal subset, forward cost, arcs (ilabel, string, next|None, w)
        self.states: list[tuple[list[Element], float]] = []
        self.out_arcs: list[list[tuple[int, tuple[int, ...], int | None, Weight]]] = []
        self.minimal_hash: dict[tuple, list[tuple[list[Weight], int]]] = {}
        self.initial_hash: dict[tuple, list[tuple[list[Weight], Element]]] = {}
        self.queue = _TaskQueue()

    @staticmethod
    def _lookup(table: dict, subset: list[Element]):
        for weights, value in table.get(tuple((e[0], e[1]) for e in subset), ()):
            if all(approx_equal(w, e[2]) for w, e in zip(weights, subset, strict=True)):
                return value
        return None

    @staticmethod
    def _store(table: dict, subset: list[Element], value) -> None:
        key = tuple((e[0], e[1]) for e in subset)
        table.setdefault(key, []).append(([e[2] for e in subset], value))

    def run(self) -> None:
        lat = self.lat
        subset = self._minimal(self._closure([(lat.start, (), ONE)]))
        self._new_state(subset, 0.0)
        while self.queue:
            _, ostate, label, task_subset = self.queue.pop()
            self._process_transition(ostate, label, task_subset)

    def _closure(self, subset: list[Element]) -> list[Element]:
        """EpsilonClosure: Kaldi's queue takes the lowest state first and skips an element
        replaced since it was queued. The lattice is top-sorted, so every arc leads to a
        higher state: each state is taken once, after all its predecessors, with its final
        element; so the queue here holds each state once (none without epsilon arcs: taking
        it would do nothing) and the element is looked up when the state is taken."""
        eps = self.eps
        cur = {e[0]: e for e in subset}
        heap = [e[0] for e in subset if eps[e[0]]]
        if not heap:
            return sorted(cur.values(), key=_state_of)
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        while heap:
            state, string, ew = cur[pop(heap)]
            for olabel, w, nxt in eps[state]:
                weight = (ew[0] + w[0], ew[1] + w[1])
                nstring = string + (olabel,) if olabel else string
                old = cur.get(nxt)
                if old is None:
                    cur[nxt] = (nxt, nstring, weight)
                    if eps[nxt]:
                        push(heap, nxt)
                elif compare_with_strings(weight, nstring, old[2], old[1]) == 1:
                    cur[nxt] = (nxt, nstring, weight)
        return sorted(cur.values(), key=_state_of)

    def _minimal(self, subset: list[Element]) -> list[Element]:
        return [e for e in subset if self.emitting[e[0]]]

    def _new_state(self, subset: list[Element], forward_cost: float) -> int:
        sid = len(self.states)
        self.states.append((subset, forward_cost))
        self.out_arcs.append([])
        self._store(self.minimal_hash, subset, sid)
        self._process_final(sid)
        self._process_transitions(sid)
        return sid

    def _process_final(self, sid: int) -> None:
        subset, forward_cost = self.states[sid]
        best: tuple[Weight, tuple[int, ...]] | None = None
        for state, string, weight in subset:
            w = times(weight, self.lat.final[state])
            if not is_zero(w) and (best is None or
                                    compare_with_strings(w, string, best[0], best[1]) == 1):
                best = (w, string)
        if best is not None and cost(best[0]) + forward_cost <= self.cutoff:
            self.out_arcs[sid].append((0, best[1], None, best[0]))

    def _process_transitions(self, sid: int) -> None:
        subset, forward_cost = self.states[sid]
        elems = []
        labelled = self.labelled
        for state, string, weight in subset:
            for ilabel, olabel, w, nxt in labelled[state]:
                elems.append((ilabel, (nxt, string + (olabel,) if olabel else string,
                                       (weight[0] + w[0], weight[1] + w[1]))))
        elems.sort(key=lambda p: (p[0], p[1][0]))
        for label, group in itertools.groupby(elems, key=lambda p: p[0]):
            task = [e for _, e in group]
            priority = min(cost(e[2]) + self.back[e[0]] for e in task) + forward_cost
            if priority > self.cutoff:
                continue
            unique: list[Element] = []
            for e in task:  # MakeSubsetUnique: the best element per state
                if unique and unique[-1][0] == e[0]:
                    if compare_with_strings(e[2], e[1], unique[-1][2], unique[-1][1]) == 1:
                        unique[-1] = e
                else:
                    unique.append(e)
            self.queue.push((priority, sid, label, unique))

    def _process_transition(self, ostate: int, label: int, subset: list[Element]) -> None:
        forward_cost = self.states[ostate][1]
        subset, tot_weight, common = normalize_subset(subset)
        forward_cost += cost(tot_weight)
        found = self._lookup(self.initial_hash, subset)
        if found is None:
            minimal = self._minimal(self._closure(subset))
            minimal, weight, string = normalize_subset(minimal)
            fc = forward_cost + cost(weight)
            nxt = self._lookup(self.minimal_hash, minimal)
            if nxt is None:
                nxt = self._new_state(minimal, fc)
            found = (nxt, string, weight)
            self._store(self.initial_hash, subset, found)
        nxt, next_string, next_weight = found
        self.out_arcs[ostate].append((label, common + next_string, nxt,
                                      times(tot_weight, next_weight)))

    def output_lattice(self, first_removed: int | None = None) -> Lattice:
        """Output(MutableFst<Arc>*): strings spelled out on chains of new states; input labels
        from ``first_removed`` up (the phones) written as epsilons."""
        out_arcs: list[list[Arc]] = [[] for _ in self.states]
        final: list[Weight] = [ZERO] * len(self.states)
        for s, arcs in enumerate(self.out_arcs):
            for ilabel, seq, nxt, weight in arcs:
                if first_removed is not None and ilabel >= first_removed:
                    ilabel = 0
                cur = s
                if nxt is None:
                    for i, sym in enumerate(seq):
                        new = len(out_arcs)
                        out_arcs.append([])
                        final.append(ZERO)
                        out_arcs[cur].append((0, sym, weight if i == 0 else ONE, new))
                        cur = new
                    final[cur] = ONE if seq else weight
                    continue
                for i in range(len(seq) - 1):
                    new = len(out_arcs)
                    out_arcs.append([])
                    final.append(ZERO)
                    out_arcs[cur].append((ilabel if i == 0 else 0, seq[i],
                                          weight if i == 0 else ONE, new))
                    cur = new
                last = len(seq) <= 1
                out_arcs[cur].append((ilabel if last else 0, seq[-1] if seq else 0,
                                      weight if last else ONE, nxt))
        return Lattice(out_arcs, final, 0)

    def output_compact(self) -> CompactLattice:
        """Output(MutableFst<CompactArc>*): one state per determinized state."""
        return compact_output(self.out_arcs)


@dataclass(frozen=True)
class PhoneMap:
    """Per transition-id: its phone, and whether it starts a phone without being a self-loop
    (TransitionIdIsStartOfPhone && !IsSelfLoop)."""

    phone: list[int]
    starts_phone: list[bool]

    @classmethod
    def of(cls, trans: TransitionInfo) -> PhoneMap:
        phone, starts = [0], [False]
        for p, hmm_state, _fwd, _loop in trans.tuples:
            for dest, _prob in trans.topology.entry(p)[hmm_state].transitions:
                phone.append(p)
                starts.append(hmm_state == 0 and dest != hmm_state)
        return cls(phone, starts)


def _insert_phones(lat: Lattice, phones: PhoneMap) -> int:
    """DeterminizeLatticeInsertPhones: a phone label where a phone starts (not on the start
    state's arcs, as Kaldi); returns the first phone label."""
    first = 1 + max(map(_state_of, itertools.chain.from_iterable(lat.arcs)), default=0)
    for s in range(len(lat.arcs)):
        if s == lat.start:
            continue
        arcs = lat.arcs[s]
        for i, (ilabel, olabel, w, nxt) in enumerate(arcs):
            if olabel == 0 or not phones.starts_phone[olabel]:
                continue
            label = first + phones.phone[olabel]
            if ilabel == 0:
                arcs[i] = (label, olabel, w, nxt)
            else:
                extra = lat.add_state()
                lat.arcs[extra].append((label, 0, ONE, nxt))
                arcs[i] = (ilabel, olabel, w, extra)
    return first


def determinize_lattice_phone_pruned(raw: Lattice, trans: TransitionInfo,
                                     beam: float) -> CompactLattice:
    """DeterminizeLatticePhonePrunedWrapper on a raw lattice (transition-ids in, words out)
    with Kaldi's default options (phone and word determinization, no minimization)."""
    if not raw.arcs:
        return CompactLattice()
    # Invert, TopSort and ArcSort by ilabel, in one copy
    order = top_order([[a[3] for a in arcs] for arcs in raw.arcs])
    new = [0] * len(order)
    for i, s in enumerate(order):
        new[s] = i
    lat = Lattice([sorted([(a[1], a[0], a[2], new[a[3]]) for a in raw.arcs[s]], key=_state_of)
                   for s in order], [raw.final[s] for s in order], new[raw.start])
    first_phone = _insert_phones(lat, PhoneMap.of(trans))
    det = _Determinizer(top_sort(lat), beam)
    det.run()
    det = _Determinizer(top_sort(det.output_lattice(first_removed=first_phone)), beam)
    det.run()
    return connect_compact(det.output_compact())
