"""The compiled determinizer (asrdist.decode.lattice._native) against the Python one it was
transcribed from: the same compact lattice to the bit, on the compiled search's raw lattices
of the decoding tests' inputs (kaldi_expected/: the tiny system's graph and score matrices)
under several options; and a check that it was built at all, so that a broken build fails
here instead of leaving decoding silently slower."""

from __future__ import annotations

import importlib.util

import kaldiio
import numpy as np
import pytest

from asrdist.decode.lattice import CompactLattice, LatticeDecoder, LatticeOptions, fst_bytes
from asrdist.errors import AsrdistError
from asrdist.kaldi.transition_model import read_transition_model
from asrdist.testing.lattices import lattice_bits
from tests.decode.test_lattice import EXPECTED


def test_the_compiled_determinizer_was_built():
    assert importlib.util.find_spec("asrdist.decode.lattice._native") is not None, (
        "asrdist.decode.lattice._native is missing: pip install -e . (g++ and pybind11) "
        "did not build it")


def _score_matrices() -> list[tuple[str, np.ndarray]]:
    """The committed matrices (three sentences with a close rival, 40 frames of noise) and two
    noisier ones, for larger lattices."""
    mats = [(utt, m) for utt, m in kaldiio.load_ark(str(EXPECTED / "loglikes.ark"))]
    rng = np.random.default_rng(32)
    num_pdfs = mats[0][1].shape[1]
    for frames in (30, 60):
        mats.append((f"random{frames}", rng.normal(-8.0, 3.0, (frames, num_pdfs))
                     .astype(np.float32)))
    return mats


@pytest.mark.parametrize("opts", [LatticeOptions(), LatticeOptions(lattice_beam=4.0),
                                  LatticeOptions(acwt=0.05, beam=10.0, lattice_beam=6.0)],
                         ids=["decode.sh", "latbeam4", "acwt0.05-latbeam6"])
def test_compiled_lattices_equal_the_pythons_to_the_bit(opts):
    trans = read_transition_model(EXPECTED / "final.mdl")
    dec = LatticeDecoder(EXPECTED / "HCLG.fst", trans, opts, native=True)
    sizes = []
    for utt, scores in _score_matrices():
        raw = dec.search(scores)
        ours, python = dec.compact_native(raw), dec.compact_python(raw)
        assert lattice_bits(ours) == lattice_bits(python), utt
        sizes.append(python.num_states)
    assert max(sizes) > 20  # lattices that branch, not single paths


def test_bad_input_is_one_error_line_not_a_crash():
    from asrdist.decode.lattice import _native

    trans = read_transition_model(EXPECTED / "final.mdl")
    dec = LatticeDecoder(EXPECTED / "HCLG.fst", trans, native=True)
    scores = next(iter(kaldiio.load_ark(str(EXPECTED / "loglikes.ark"))))[1]
    data = fst_bytes(dec.search(scores))
    with pytest.raises(ValueError, match="^the raw lattice's bytes end too early$"):
        _native.compact_lattice(data[:len(data) // 2], dec.phone, dec.starts_phone, 8.0, 10.0)
    with pytest.raises(ValueError, match=r"^transition-id \d+ in the lattice is not in the "
                                         "model$"):
        _native.compact_lattice(data, dec.phone[:2], dec.starts_phone[:2], 8.0, 10.0)


def test_a_build_of_older_sources_is_one_line_saying_to_rebuild(monkeypatch):
    """A module built before this tree's sources (no best_paths) is refused, not half used."""
    import types

    from asrdist.decode import lattice
    from asrdist.decode.lattice import native

    monkeypatch.setattr(native, "_native",
                        types.SimpleNamespace(Search=object, compact_lattice=object))
    with pytest.raises(AsrdistError, match=r"older sources \(no best_paths, "
                                           r"compact_lattice_bytes\).*rebuild"):
        lattice.best_paths(lattice.CompactLattice(), [(10.0, 0.0)])


def test_a_flat_lattice_is_written_and_swept_as_its_python_form_is():
    """Decoding keeps the compiled pipeline's flat arrays from the determinizer to lat.N.gz and
    the sweep: the archive entry the compiled writer makes is the Python writer's byte for
    byte, the best paths the same, on weighted lattices, an unweighted one and an empty one."""
    from asrdist.decode.lattice import best_paths
    from asrdist.decode.lattice.native import FlatLattice, flat_of
    from asrdist.decode.lattice_io import compact_lattice_binary

    dec = LatticeDecoder(EXPECTED / "HCLG.fst", read_transition_model(EXPECTED / "final.mdl"),
                         native=True)
    points = [(lmwt, wip) for lmwt in (5.0, 10.0, 17.0) for wip in (0.0, 1.0)]
    one = (np.float32(0.0), np.float32(0.0))
    unweighted = CompactLattice([[(7, one, (), 1)], []], [None, (one, ())], 0)
    flats = [dec.lattice_of(scores) for _, scores in _score_matrices()]
    flats += [FlatLattice(flat_of(unweighted)), FlatLattice(flat_of(CompactLattice()))]
    for flat in flats:
        assert isinstance(flat, FlatLattice)
        python = flat.compact()
        assert compact_lattice_binary("u", flat) == compact_lattice_binary("u", python)
        if python.num_states:
            assert best_paths(flat, points) == best_paths(python, points)
    assert b"compactlattice44" in compact_lattice_binary("u", flats[-2])


def test_flat_arrays_that_disagree_are_one_line():
    from asrdist.decode.lattice.native import FlatLattice, flat_of
    from asrdist.decode.lattice_io import compact_lattice_binary

    one = (np.float32(0.0), np.float32(1.0))
    arrays = list(flat_of(CompactLattice([[(7, one, (3,), 1)], []], [None, (one, ())], 0)))
    arrays[1] = np.array([2, 0], np.int64)  # two arcs counted, one there
    with pytest.raises(AsrdistError, match="^the compact lattice's flat arrays disagree|"
                                           "^the compact lattice's arc counts"):
        compact_lattice_binary("u", FlatLattice(tuple(arrays)))
