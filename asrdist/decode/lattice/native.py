"""The compiled module (:mod:`asrdist.decode.lattice._native`, built by ``pip install -e .``
from csrc/) as this package uses it: whether it is there and current, and a compact lattice in
its flat arrays (:class:`FlatLattice`), which decoding passes from the determinizer to the
archive and the sweep as it is, and turns into a
:class:`~asrdist.decode.lattice.fst.CompactLattice` only where Python code reads the arcs.
"""

from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from asrdist.decode.lattice.fst import CompactLattice
from asrdist.decode.lattice.weights import F32, ZERO
from asrdist.errors import AsrdistError

try:
    from asrdist.decode.lattice import _native
except ImportError:  # not built: a checkout used through PYTHONPATH
    _native = None

log = logging.getLogger(__name__)


def compiled() -> ModuleType | None:
    """The compiled module, or None where it was not built."""
    return _native

# what this tree calls in the module: a build of older sources lacks some (a checkout updated
# without pip install -e .), and is refused in one line rather than half used
_NATIVE_CALLS = ("Search", "compact_lattice", "best_paths", "compact_lattice_bytes")
MODULE = "asrdist.decode.lattice._native"


def native_search() -> str:
    """Which search makes the lattices here: the compiled one, or kaldi-decoder's (no
    --max-active) where the module was not built."""
    return "asrdist" if _native is not None else "kaldi-decoder"


def check_native_build() -> None:
    """One line saying to rebuild, if the compiled module predates this tree's sources."""
    missing = [c for c in _NATIVE_CALLS if not hasattr(_native, c)]
    if missing:
        raise AsrdistError(f"{MODULE} was built from older sources (no "
                           f"{', '.join(missing)}): rebuild it (pip install -e .)")


_warned_not_built = False


def warn_not_built() -> None:
    """One line, once a process: the compiled module is missing."""
    global _warned_not_built
    if not _warned_not_built:
        _warned_not_built = True
        log.warning(f"{MODULE} is not built (pip install -e .): lattices "
                    "are searched by kaldi-decoder (no --max-active) and determinized and "
                    "swept in Python: several times the CPU")


@dataclass(frozen=True)
class FlatLattice:
    """A compact lattice as the compiled module holds it (``arrays``: start, arcs per state,
    words, weights (pairs), next states, final flags, final weights (pairs), string offsets
    (the arcs', then the states' finals), transition-ids): built as Python tuples
    (:meth:`compact`) only where they are read."""

    arrays: tuple

    def compact(self) -> CompactLattice:
        return compact_from_flat(*self.arrays)

    def fst_bytes(self) -> bytes:
        """OpenFst's binary layout of it (compactlattice44), as lattice_io writes one (the
        module was checked current when the decoder that made it was)."""
        try:
            return _native.compact_lattice_bytes(*self.arrays)
        except ValueError as e:
            raise AsrdistError(str(e)) from None


def compact_from_flat(start: int, counts: np.ndarray, words: np.ndarray, weights: np.ndarray,
                       nexts: np.ndarray, finals: np.ndarray, final_weights: np.ndarray,
                       offsets: np.ndarray, labels: np.ndarray) -> CompactLattice:
    """The CompactLattice of the compiled compact_lattice's flat arrays, its weights
    float32 scalars and its strings tuples of ints, as the Python determinizer makes them."""
    ids, ends = labels.tolist(), offsets.tolist()
    strings = [tuple(ids[a:b]) for a, b in zip(ends, ends[1:], strict=False)]
    num_arcs = len(words)
    flat = list(zip(words.tolist(), zip(list(weights[0::2]), list(weights[1::2]), strict=True),
                    strings[:num_arcs], nexts.tolist(), strict=True))
    arcs, lo = [], 0
    for k in counts.tolist():
        arcs.append(flat[lo:lo + k])
        lo += k
    final_w = zip(list(final_weights[0::2]), list(final_weights[1::2]), strict=True)
    final = [(w, string) if is_final else None
             for is_final, w, string in zip(finals.tolist(), final_w, strings[num_arcs:],
                                            strict=True)]
    return CompactLattice(arcs, final, start)


def flat_of(clat: CompactLattice) -> tuple:
    """A compact lattice in the compiled compact_lattice's flat arrays (the inverse of
    :func:`compact_from_flat`)."""
    arcs = [a for state_arcs in clat.arcs for a in state_arcs]
    finals = [f is not None for f in clat.final]
    strings = [a[2] for a in arcs] + [() if f is None else f[1] for f in clat.final]
    offsets = np.zeros(len(strings) + 1, np.int64)
    np.cumsum([len(string) for string in strings], out=offsets[1:])
    return (clat.start, np.array([len(a) for a in clat.arcs], np.int64),
            np.array([a[0] for a in arcs], np.int32),
            np.array([w for a in arcs for w in a[1]], F32).reshape(-1),
            np.array([a[3] for a in arcs], np.int32), np.array(finals, np.uint8),
            np.array([w for f in clat.final for w in (ZERO if f is None else f[0])], F32),
            offsets, np.fromiter(itertools.chain.from_iterable(strings), np.int32))


def search_graph(path: str | os.PathLike) -> object:
    """HCLG for the compiled lattice search (asrdist.decode.lattice._native.Graph): a const
    file's arrays mapped read-only and shared, so that a job's graph costs the file's pages
    (clean, shared with every job on the machine) and no copy; a vector file's states and arcs
    converted once into the same arrays."""
    # graph imports kaldilm, which must not come before kaldi_decoder (the package docstring)
    from asrdist.decode.graph import const_offsets, fst_chunks, read_header

    if _native is None:
        raise AsrdistError("the compiled lattice search is not built (pip install -e .)")
    path = Path(path)
    head = read_header(path)
    try:
        if head.fst_type == "const":
            states_at, arcs_at = const_offsets(head)
            return _native.mapped_graph(str(path), head.start, head.num_states, head.num_arcs,
                                        states_at, arcs_at)
        chunks = list(fst_chunks(path))  # a vector header's arc count may be 0: not used
        final, narcs, arcs = (np.concatenate([c[i] for c in chunks]) for i in range(3))
        del chunks  # the copy below is the second of the arrays at once, not the third
        return _native.flat_graph(str(path), head.start, final, narcs,
                                  arcs.view("<i4").reshape(-1, 4))
    except ValueError as e:
        raise AsrdistError(str(e)) from None
