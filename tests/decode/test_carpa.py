"""Kaldi's G.carpa read as it is (kaldi_expected/G.carpa: arpa-to-const-arpa on fg.arpa, made by
make_lmrescore_expected.sh): every lookup equals the ARPA reader's, and rescoring with it gives
lattice-lmrescore-const-arpa's lattices."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from asrdist.decode.arpa import read_arpa
from asrdist.decode.carpa import CarpaLM
from asrdist.decode.lmrescore import add_lm, read_lattice_archive
from asrdist.errors import AsrdistError

EXPECTED = Path(__file__).parent / "kaldi_expected"


def test_every_lookup_equals_the_arpa_readers():
    words = {w: int(i) for w, i in (line.split() for line in
                                    (EXPECTED / "words.txt").read_text().splitlines())}
    arpa = read_arpa(EXPECTED / "fg.arpa", words, "<unk>")
    carpa = CarpaLM(EXPECTED / "G.carpa")
    assert (carpa.order, carpa.bos, carpa.eos, carpa.unk) == (4, words["<s>"], words["</s>"],
                                                             words["<unk>"])
    ids = sorted(set(words.values()) - {0})
    for n in range(4):
        for hist in itertools.product(ids, repeat=n):
            assert carpa.history_exists(hist) == arpa.history_exists(hist), hist
            for word in ids:
                assert carpa.logprob(word, hist) == arpa.logprob(word, hist), (word, hist)


def test_rescoring_with_g_carpa_equals_lattice_lmrescore_const_arpa():
    carpa = CarpaLM(EXPECTED / "G.carpa")
    kaldi = read_lattice_archive(EXPECTED / "rescored.1.bin")
    for key, clat in read_lattice_archive(EXPECTED / "removed.1.bin").items():
        ours = add_lm(clat, carpa)
        assert ours is not None and (ours.arcs, ours.final) == (kaldi[key].arcs,
                                                                 kaldi[key].final)


def test_a_file_that_is_not_a_g_carpa_is_one_line(tmp_path):
    (tmp_path / "G.carpa").write_bytes((EXPECTED / "G.carpa").read_bytes()[:100])
    with pytest.raises(AsrdistError, match=r"G\.carpa: truncated"):
        CarpaLM(tmp_path / "G.carpa")
    with pytest.raises(AsrdistError, match=r"fg\.arpa: not a Kaldi G\.carpa"):
        CarpaLM(EXPECTED / "fg.arpa")
