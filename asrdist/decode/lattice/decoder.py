"""One search per utterance, to latgen-faster-mapped's determinized compact lattice: the compiled
search and pipeline where built, kaldi-decoder's search and the Python determinizer otherwise.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

import kaldi_hmm_gmm  # noqa: F401  (first: kaldifst or kaldi_decoder before it hang)
import numpy as np

from asrdist.decode.lattice import native as _compiled
from asrdist.decode.lattice.determinize_pruned import PhoneMap, determinize_lattice_phone_pruned
from asrdist.decode.lattice.fst import CompactLattice, connect, scale_acoustics
from asrdist.decode.lattice.native import FlatLattice
from asrdist.decode.lattice.raw import from_kaldifst, fst_bytes, no_cyclic_gc, with_cost_offsets
from asrdist.decode.lattice.weights import F32
from asrdist.errors import AsrdistError
from asrdist.options import POSITIVE, Options, at_least, option

if TYPE_CHECKING:
    import kaldifst

    from asrdist.kaldi.transition_model import TransitionInfo


@dataclass(frozen=True)
class LatticeOptions(Options):
    """steps/nnet3/decode.sh's options for latgen-faster-mapped (--min-active: Kaldi's
    default). The compiled search (asrdist.decode.lattice._native) honours them all, as
    LatticeFasterDecoder does: past --max-active tokens a frame's beam narrows to the
    max-active-th best cost (plus 0.5), below --min-active it widens to the min-active-th.
    kaldi-decoder's LatticeSimpleDecoder, the search where the module was not built, has
    neither (it keeps every token within the beam) and differs in which tokens it keeps: on the
    mini recipe's GMM scores and trigram graph 17 of 20 lattices are equivalent to
    latgen-faster-mapped's, all 39 sweep points' best paths equal Kaldi's
    (bench.lattice_decode)."""

    acwt: float = option(0.1, "Acoustic scale of the search (the main text and ctm: LMWT "
                               "1/acwt).", check=POSITIVE)
    beam: float = option(15.0, "Decoding beam.", check=POSITIVE)
    lattice_beam: float = option(8.0, "Lattice beam: paths kept within it of the best.",
                                 check=POSITIVE)
    max_active: int = option(7000, "Most tokens a frame expands (the beam narrows past it).",
                             check=at_least(2))
    min_active: int = option(200, "Fewest tokens a frame expands (the beam widens below it).",
                             check=at_least(0))

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_active > self.max_active:
            raise AsrdistError(f"--min-active {self.min_active} is above --max-active "
                               f"{self.max_active}")


def load_kaldi_decoder() -> ModuleType:
    """kaldi_decoder, imported; an error in a process that imported kaldilm first (it would
    hang). A process that decodes calls this before it imports :mod:`asrdist.decode.graph`."""
    if "kaldilm" in sys.modules and "kaldi_decoder" not in sys.modules:
        raise AsrdistError("lattice decoding needs kaldi_decoder, which hangs a process that "
                           "imported kaldilm first (asrdist.decode.graph): run it in a "
                           "process that imports asrdist.decode.lattice before the graph code")
    import kaldi_decoder

    return kaldi_decoder


class LatticeDecoder:
    """One search per utterance, to a determinized compact lattice (acoustic costs unscaled, as
    latgen-faster-mapped writes them).

    With asrdist.decode.lattice._native built, the search is its own (LatticeFasterDecoder's
    algorithm, over HCLG's file mapped in memory: :func:`~.native.search_graph`).
    Without it, kaldi-decoder's LatticeSimpleDecoder over a kaldifst graph: kaldi-decoder is
    imported here, never at module level, as it hangs a process that imported kaldilm before
    it, so that path refuses to start in such a process.
    """

    def __init__(self, hclg: str | os.PathLike | kaldifst.StdFst, trans: TransitionInfo,
                 opts: LatticeOptions = LatticeOptions(), native: bool | None = None):
        """``hclg``: the graph's file (vector or const), or for kaldi-decoder a kaldifst FST.
        ``native``: the compiled search and determinizer (True), kaldi-decoder's search and
        the Python determinizer (False), or the compiled ones where they were built (None)."""
        compiled = _compiled.compiled()
        if native is None:
            native = compiled is not None
            if not native:
                _compiled.warn_not_built()
        elif native and compiled is None:
            raise AsrdistError(f"{_compiled.MODULE} is not built (pip install -e .)")
        self.native = native
        self.trans = trans
        self.opts = opts
        self.reached_final = False
        phones = PhoneMap.of(trans)
        self.phone = np.array(phones.phone, dtype=np.int32)
        self.starts_phone = np.array(phones.starts_phone, dtype=np.uint8)
        is_path = isinstance(hclg, (str, os.PathLike))
        if native:
            _compiled.check_native_build()
            if not is_path:
                raise AsrdistError("the compiled search reads HCLG from its file: pass its path")
            self.searcher = compiled.Search(_compiled.search_graph(hclg), opts.beam,
                                            opts.max_active, opts.min_active, opts.lattice_beam)
            return
        kaldi_decoder = load_kaldi_decoder()
        self.kd = kaldi_decoder
        if is_path:
            from asrdist.decode.graph import read_fst

            hclg = read_fst(hclg)
        self.hclg = hclg  # the C++ decoder keeps a reference only
        config = kaldi_decoder.LatticeSimpleDecoderConfig()
        config.beam = opts.beam
        config.lattice_beam = opts.lattice_beam
        self.decoder = kaldi_decoder.LatticeSimpleDecoder(hclg, config)

    def search(self, pdf_scores: np.ndarray) -> bytes | kaldifst.Lattice:
        """The raw lattice of a frames x pdfs score matrix (scaled by acwt): OpenFst's binary
        layout of it from the compiled search, a kaldifst.Lattice from kaldi-decoder.

        As decode.sh (--allow-partial=true), a search that reaches no final state still gives
        a lattice, ending in the last frame's states; ``reached_final`` says which it was.
        """
        if pdf_scores.ndim != 2 or pdf_scores.shape[0] == 0:
            raise AsrdistError("cannot decode an empty score matrix")
        matrix = np.ascontiguousarray(
            F32(self.opts.acwt) * pdf_scores[:, self.trans.tid_to_pdf[1:]].astype(F32))
        if self.native:
            try:
                raw, self.reached_final = self.searcher.decode(matrix)
            except ValueError as e:
                raise AsrdistError(str(e)) from None
            return raw
        self.decoder.decode(self.kd.DecodableCtc(matrix))
        self.reached_final = self.decoder.final_relative_cost() != math.inf
        ok, raw = self.decoder.get_raw_lattice(True)
        if not ok or raw.num_states == 0:
            raise AsrdistError("the search kept no lattice (all tokens pruned)")
        return raw

    def decode(self, pdf_scores: np.ndarray) -> CompactLattice:
        """latgen-faster-mapped's lattice for one utterance."""
        lat = self.lattice_of(pdf_scores)
        return lat.compact() if isinstance(lat, FlatLattice) else lat

    def lattice_of(self, pdf_scores: np.ndarray) -> CompactLattice | FlatLattice:
        """:meth:`decode`'s lattice in the form it is made in: the compiled pipeline's flat
        arrays, which the archive writer and the sweep take as they are, or the Python's
        CompactLattice."""
        if self.native:
            return self.flat_native(self.search(pdf_scores))
        return self.compact_python(self.search(pdf_scores))

    def compact_python(self, raw: bytes | kaldifst.Lattice) -> CompactLattice:
        """The determinized compact lattice of a raw one, its acoustic costs unscaled (times
        1/acwt), by the Python here. The cost offsets' rounding (:func:`with_cost_offsets`)
        is for kaldi-decoder's lattices: the compiled search's costs are rounded already."""
        with no_cyclic_gc():
            lat = connect(from_kaldifst(raw))
            clat = determinize_lattice_phone_pruned(
                lat if isinstance(raw, bytes) else with_cost_offsets(lat), self.trans,
                self.opts.lattice_beam)
            return scale_acoustics(clat, 1.0 / self.opts.acwt)

    def compact_native(self, raw: bytes | kaldifst.Lattice) -> CompactLattice:
        """:meth:`compact_python`'s lattice, by asrdist.decode.lattice._native."""
        return self.flat_native(raw).compact()

    def flat_native(self, raw: bytes | kaldifst.Lattice) -> FlatLattice:
        """:meth:`compact_native`'s lattice in the compiled module's flat arrays."""
        try:
            flat = _compiled.compiled().compact_lattice(
                fst_bytes(raw), self.phone, self.starts_phone, self.opts.lattice_beam,
                1.0 / self.opts.acwt, not isinstance(raw, bytes))
        except ValueError as e:
            raise AsrdistError(str(e)) from None
        return FlatLattice(tuple(flat))
