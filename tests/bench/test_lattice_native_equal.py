"""bench.lattice_native_equal on the decoding tests' tiny system (kaldi_expected/): every
utterance compared, its lattices equal to the bit, both determinizers timed."""

from __future__ import annotations

from bench.lattice_native_equal import compare
from tests.decode.test_lattice import EXPECTED


def test_every_utterance_is_compared_and_none_differs():
    found = compare(EXPECTED / "final.mdl", EXPECTED / "HCLG.fst", EXPECTED / "loglikes.ark")
    assert found["utts"] == 4 and found["differ"] == []
    assert found["states"] > 4 and found["native_s"] >= 0 and found["python_s"] > 0
