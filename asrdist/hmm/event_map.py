"""Kaldi's EventMap, the decision tree inside a ``tree`` file, as Python values.

kaldi-hmm-gmm can read and use a ContextDependency but cannot build one, so trees built here
(asrdist.gmm.build_tree) are plain values: a ``Leaf`` (ConstantEventMap), a ``Table`` indexed
by one key's value (TableEventMap) or a ``Split`` on a set of values (SplitEventMap). An event
maps keys to values: key -1 (``PDF_CLASS``, Kaldi's kPdfClass) is the HMM state's pdf-class,
keys 0 .. N-1 the phones of the context window (0 outside the utterance). ``to_context_
dependency`` writes Kaldi's binary ContextDependency and loads it into khg, which then compiles
graphs, builds H and TransitionModels from it like from any Kaldi tree.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import numpy as np

from asrdist.kaldi.io_funcs import KaldiWriter

PDF_CLASS = -1


@dataclass(frozen=True)
class Leaf:
    answer: int


@dataclass(frozen=True)
class Table:
    key: int
    table: tuple[EventMap | None, ...]  # indexed by the key's value; None: no answer


@dataclass(frozen=True)
class Split:
    key: int
    yes_set: frozenset[int]
    yes: EventMap
    no: EventMap


EventMap = Leaf | Table | Split
Event = Mapping[int, int]


def lookup(tree: EventMap, event: Event) -> int | None:
    """The leaf an event reaches (EventMap::Map), None when a key it needs is missing."""
    node: EventMap | None = tree
    while not isinstance(node, Leaf):
        if node is None or node.key not in event:
            return None
        value = event[node.key]
        if isinstance(node, Table):
            node = node.table[value] if 0 <= value < len(node.table) else None
        else:
            node = node.yes if value in node.yes_set else node.no
    return node.answer


def leaves(tree: EventMap) -> Iterator[int]:
    """Every leaf's answer, depth first, yes before no, tables in value order."""
    if isinstance(tree, Leaf):
        yield tree.answer
    elif isinstance(tree, Table):
        for sub in tree.table:
            if sub is not None:
                yield from leaves(sub)
    else:
        yield from leaves(tree.yes)
        yield from leaves(tree.no)


def replace_leaves(tree: EventMap, new: Callable[[int], EventMap]) -> EventMap:
    """``tree`` with each leaf replaced by ``new(answer)`` (EventMap::Copy with a mapping)."""
    if isinstance(tree, Leaf):
        return new(tree.answer)
    if isinstance(tree, Table):
        return Table(tree.key, tuple(None if s is None else replace_leaves(s, new)
                                     for s in tree.table))
    return Split(tree.key, tree.yes_set, replace_leaves(tree.yes, new),
                 replace_leaves(tree.no, new))


def renumber(tree: EventMap) -> tuple[EventMap, int]:
    """Leaves renumbered 0 .. L-1 in the order of their old numbers (RenumberEventMap)."""
    order = {old: new for new, old in enumerate(sorted(set(leaves(tree))))}
    return replace_leaves(tree, lambda a: Leaf(order[a])), len(order)


def _write(tree: EventMap | None, w: KaldiWriter) -> None:
    if tree is None:
        w.write_token("NULL")
    elif isinstance(tree, Leaf):
        w.write_token("CE")
        w.write_int32(tree.answer)
    elif isinstance(tree, Table):
        w.write_token("TE")
        w.write_int32(tree.key)
        w.raw(b"\xfc" + struct.pack("<I", len(tree.table)))  # Kaldi's unsigned size
        w.write_token("(")
        for sub in tree.table:
            _write(sub, w)
        w.write_token(")")
    else:
        w.write_token("SE")
        w.write_int32(tree.key)
        w.write_int_vector(sorted(tree.yes_set))
        w.write_token("{")
        _write(tree.yes, w)
        _write(tree.no, w)
        w.write_token("}")


def context_dependency_bytes(tree: EventMap, width: int, central: int) -> bytes:
    """A binary ``tree`` file (ContextDependency::Write) holding ``tree``."""
    w = KaldiWriter(binary=True)
    w.write_token("ContextDependency")
    w.write_int32(width)
    w.write_int32(central)
    w.write_token("ToPdf")
    _write(tree, w)
    w.write_token("EndContextDependency")
    return w.getvalue()


def to_context_dependency(tree: EventMap, width: int, central: int) -> khg.ContextDependency:
    """``tree`` as khg's ContextDependency (through Kaldi's own reader)."""
    data = context_dependency_bytes(tree, width, central)
    ctx_dep = khg.ContextDependency.__new__(khg.ContextDependency)
    ctx_dep.__setstate__((np.frombuffer(data[2:], dtype=np.int8).tolist(),))
    return ctx_dep
