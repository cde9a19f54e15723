"""Lattices as Kaldi's latgen-faster-mapped makes them, and the sweep on them.

No packaged library determinizes a lattice as Kaldi does (kaldifst has OpenFst's
determinization, not Kaldi's lattice determinization; kaldi-hmm-gmm's lattice decoder returns
only the best path), so this package ports it. One job per module:

- :mod:`~asrdist.decode.lattice.weights`: Kaldi's LatticeWeight and its float32 arithmetic;
- :mod:`~asrdist.decode.lattice.fst`: the Lattice and CompactLattice types, connect, top sort,
  scaling;
- :mod:`~asrdist.decode.lattice.determinize_pruned`: decoding's determinizer
  (DeterminizeLatticePhonePrunedWrapper); :mod:`~asrdist.decode.lattice.determinize`: the
  unpruned one lattice-lmrescore runs after composing with an LM. They stay two algorithms, as
  in Kaldi (determinize-lattice-pruned.cc and determinize-lattice-inl.h differ in the queue
  order that numbers the output states, and in what they keep); they share the weights, the
  subset normalization and the types;
- :mod:`~asrdist.decode.lattice.raw`: raw lattices read from OpenFst's binary layout, and
  kaldi-decoder's costs rounded as LatticeFasterDecoder's cost offsets round them;
- :mod:`~asrdist.decode.lattice.decoder`: one search per utterance to a compact lattice;
- :mod:`~asrdist.decode.lattice.sweep`: the best paths at each (LM weight, insertion penalty);
- :mod:`~asrdist.decode.lattice.native`: the compiled module as the others use it.

**The compiled module and the Python.** ``asrdist.decode.lattice._native`` (sources in
``csrc/``: ``search.cpp``, LatticeFasterDecoder's search with its options over HCLG's const
file mapped in memory; ``pipeline.cpp``, the raw lattice's read, connect, determinization,
acoustic scale and the sweep's best paths; its surface in ``_native.pyi``) is built by ``pip
install -e .`` and does the decoding (issue 32 measured the Python too slow for decoding within
1.5x of Kaldi). The Python here is the reference it was transcribed from, to the same bits
(tests/decode/test_lattice_native.py, test_lattice_sweep.py), and the fallback where the module
was not built (a checkout used through PYTHONPATH): kaldi-decoder's ``LatticeSimpleDecoder``
then searches (no --max-active; other tokens kept at the same beam) and the Python determinizes
and sweeps, several times the CPU, said once per process. Both are checked against
latgen-faster-mapped (tests/decode/kaldi_expected): the same states, arcs, words and
transition-ids; a few costs one float32 ulp apart.

kaldi-decoder hangs a process that imported kaldilm first (which :mod:`asrdist.decode.graph`
does), so it is imported only inside :class:`LatticeDecoder`; kaldi_hmm_gmm is imported before
anything of kaldifst or kaldi_decoder, which hang otherwise.
"""

from __future__ import annotations

import kaldi_hmm_gmm  # noqa: F401  (first: kaldifst or kaldi_decoder before it hang)

from asrdist.decode.lattice.decoder import LatticeDecoder, LatticeOptions, load_kaldi_decoder
from asrdist.decode.lattice.determinize import determinize_lattice
from asrdist.decode.lattice.determinize_pruned import determinize_lattice_phone_pruned
from asrdist.decode.lattice.fst import (
    CompactLattice,
    Lattice,
    connect,
    connect_compact,
    scale_acoustics,
    scale_lattice,
    top_order,
    top_sort,
)
from asrdist.decode.lattice.native import native_search
from asrdist.decode.lattice.raw import from_kaldifst, fst_bytes, no_cyclic_gc
from asrdist.decode.lattice.sweep import BestPath, best_path, best_path_words, best_paths
from asrdist.decode.lattice.weights import F32, ONE, ZERO, Weight, cost, is_zero, times

__all__ = [
    "F32", "ONE", "ZERO", "BestPath", "CompactLattice", "Lattice", "LatticeDecoder",
    "LatticeOptions", "Weight", "best_path", "best_path_words", "best_paths", "connect",
    "connect_compact", "cost", "determinize_lattice", "determinize_lattice_phone_pruned",
    "from_kaldifst", "fst_bytes", "is_zero", "load_kaldi_decoder", "native_search",
    "no_cyclic_gc", "scale_acoustics", "scale_lattice", "times", "top_order", "top_sort",
]
