"""bench.lattice_native_equal on the decoding tests' tiny system (kaldi_expected/): every
utterance compared, its lattices equal to the bit, both determinizers timed."""

from __future__ import annotations

from bench import lattice_native_equal
from bench.lattice_native_equal import compare
from tests.decode.test_lattice import EXPECTED


def test_every_utterance_is_compared_and_none_differs():
    found = compare(EXPECTED / "final.mdl", EXPECTED / "HCLG.fst", EXPECTED / "loglikes.ark")
    assert found["utts"] == 4 and found["differ"] == []
    assert found["states"] > 4 and found["native_s"] >= 0 and found["python_s"] > 0


def test_lattices_that_differ_are_named(monkeypatch):
    """Each comparison made unequal (a lattice's bits counted as a new value every call):
    every utterance is named as differing."""
    calls = iter(range(1000))
    monkeypatch.setattr(lattice_native_equal, "lattice_bits", lambda clat: next(calls))
    found = compare(EXPECTED / "final.mdl", EXPECTED / "HCLG.fst", EXPECTED / "loglikes.ark")
    assert len(found["differ"]) == found["utts"] == 4
