"""LM rescoring against Kaldi's own binaries (kaldi_expected/make_lmrescore_expected.sh):
``lattice-lmrescore --lm-scale=-1.0`` with the graph's trigram G.fst, then
``lattice-lmrescore-const-arpa --lm-scale=1.0`` with a hand-written 4-gram (backoffs, a word of
words.txt missing from it, a word of it missing from words.txt), on latgen-faster-mapped's
lattices. Ours equal Kaldi's exactly: states, arcs, words, transition-id strings and every
float32 cost to the bit (no tolerance: the same float32 sums in the same order)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from asrdist.decode.arpa import ArpaLM, read_arpa
from asrdist.decode.lattice import CompactLattice, best_path_words
from asrdist.decode.lattice_io import compact_lattice_text, write_lattices
from asrdist.decode.lmrescore import (
    BackoffFst,
    add_lm,
    read_lattice_archive,
    remove_lm,
    rescore,
)
from asrdist.errors import AsrdistError

EXPECTED = Path(__file__).parent / "kaldi_expected"


def words() -> dict[str, int]:
    return {w: int(i) for w, i in (line.split() for line in
                                   (EXPECTED / "words.txt").read_text().splitlines())}


@pytest.fixture(scope="module")
def lattices() -> dict[str, CompactLattice]:
    return read_lattice_archive(EXPECTED / "lat.1.bin")


@pytest.fixture(scope="module")
def old_lm() -> BackoffFst:
    return BackoffFst(EXPECTED / "G.fst")


@pytest.fixture(scope="module")
def new_lm() -> ArpaLM:
    return read_arpa(EXPECTED / "fg.arpa", words(), "<unk>")


def assert_same(ours: CompactLattice | None, kaldi: CompactLattice) -> None:
    """Same start, states, arcs (word, weight bits, string, next) and finals."""
    assert ours is not None
    assert ours.start == kaldi.start
    assert ours.arcs == kaldi.arcs
    assert ours.final == kaldi.final


def test_removing_the_old_lm_equals_lattice_lmrescore(lattices, old_lm):
    kaldi = read_lattice_archive(EXPECTED / "removed.1.bin")
    assert list(kaldi) == list(lattices)
    for key, clat in lattices.items():
        assert_same(remove_lm(clat, old_lm), kaldi[key])


def test_adding_the_new_lm_equals_lattice_lmrescore_const_arpa(new_lm):
    removed = read_lattice_archive(EXPECTED / "removed.1.bin")
    kaldi = read_lattice_archive(EXPECTED / "rescored.1.bin")
    for key, clat in removed.items():
        assert_same(add_lm(clat, new_lm), kaldi[key])


def test_rescored_lattices_equal_kaldis_text_and_best_paths(lattices, old_lm, new_lm):
    rescored = {key: rescore(clat, old_lm, new_lm) for key, clat in lattices.items()}
    text = "".join(compact_lattice_text(k, c) for k, c in rescored.items() if c is not None)
    assert text == (EXPECTED / "rescored.1.txt").read_text()
    for line in (EXPECTED / "rescored_sweep.txt").read_text().splitlines():
        lmwt, wip, key, *best = line.split()
        assert best_path_words(rescored[key], float(lmwt), float(wip)) == [int(w) for w in best]


def test_the_rescoring_changes_best_paths():
    """The expected outputs test something: the 4-gram moves noise1's best path at LMWT 9."""
    before = {tuple(line.split()[:3]): line.split()[3:]
              for line in (EXPECTED / "sweep.txt").read_text().splitlines()}
    after = {tuple(line.split()[:3]): line.split()[3:]
             for line in (EXPECTED / "rescored_sweep.txt").read_text().splitlines()}
    assert any(before[k] != v for k, v in after.items())


def test_an_lm_that_accepts_nothing_drops_the_lattice(lattices, tmp_path):
    """Without an unk word, a word the LM lacks has no arc: every path of utt1 holds "dog"."""
    arpa = tmp_path / "no_dog.arpa"
    arpa.write_text("\\data\\\nngram 1=4\n\n\\1-grams:\n-1.0 <s>\n-1.0 </s>\n-1.0 cat\n"
                    "-1.0 sat\n\\end\\\n")
    assert add_lm(lattices["utt1"], read_arpa(arpa, words(), None)) is None


def test_archives_read_gzipped_binary_and_text(tmp_path, lattices):
    for binary in (True, False):
        path = tmp_path / f"lat.{int(binary)}.gz"
        write_lattices(path, lattices.items(), binary=binary)
        back = read_lattice_archive(path)
        assert list(back) == list(lattices)
        if binary:
            assert back["noise1"].arcs == lattices["noise1"].arcs
    (tmp_path / "bad.gz").write_bytes(gzip.compress(b"utt1 \nnot a lattice\n"))
    with pytest.raises(AsrdistError, match=r"bad\.gz: not a Kaldi lattice archive"):
        read_lattice_archive(tmp_path / "bad.gz")


# ---- the ARPA reader --------------------------------------------------------------------


def test_arpa_lookups_follow_const_arpa(new_lm):
    w = words()
    ln10 = np.log(10.0)
    # a 4-gram found; a leaf's float has its lowest bit cleared, as G.carpa holds it
    found = new_lm.logprob(w["cat"], (w["<s>"], w["dog"], w["sat"], w["on"]))
    assert abs(found - (-0.12 * ln10)) < 1e-6
    # backoff: bo(dog sat on) + bo(sat on) + p(dog | on), summed in float32
    assert new_lm.logprob(w["dog"], (w["dog"], w["sat"], w["on"])) == pytest.approx(
        (-0.20 - 0.30 - 0.65) * ln10, abs=1e-6)
    # "sit" is not in the LM: scored as <unk>, and no history state holds it
    assert new_lm.logprob(w["sit"], ()) == new_lm.logprob(w["<unk>"], ())
    assert not new_lm.history_exists((w["dog"], w["sit"]))
    assert new_lm.history_exists((w["dog"], w["sat"], w["on"]))
    assert new_lm.skipped == 5  # the n-grams with "mat", as map_arpa_lm.pl drops them
    no_unk = read_arpa(EXPECTED / "fg.arpa", w, None)
    assert no_unk.logprob(w["sit"], ()) == -np.inf


def test_a_gzipped_arpa_reads_the_same(tmp_path, new_lm):
    gz = tmp_path / "fg.arpa.gz"
    gz.write_bytes(gzip.compress((EXPECTED / "fg.arpa").read_bytes()))
    again = read_arpa(gz, words(), "<unk>")
    for ours, theirs in zip(again.tables, new_lm.tables, strict=True):
        for field in ("keys", "prob", "backoff", "parent"):
            assert np.array_equal(getattr(ours, field), getattr(theirs, field))


@pytest.mark.parametrize("text, error", [
    ("ngram 1=1\n\n\\1-grams:\n-1.0 cat\n\\end\\\n", r"no \\data\\ section"),
    ("\\data\\\nngram one=1\n\n\\1-grams:\n-1.0 cat\n\\end\\\n",
     r"lm\.arpa:2: expected 'ngram N=COUNT'"),
    ("\\data\\\nngram 1=1\n\n\\2-grams:\n", r"lm\.arpa:4: expected '\\1-grams:'"),
    ("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0 cat\nx dog\n\\end\\\n",
     r"lm\.arpa:6: invalid log-probability 'x'"),
    ("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0 cat -0.5 extra\n\\end\\\n",
     r"lm\.arpa:5: invalid 1-gram line"),
    ("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0 cat\n-1.0 dog\n\\end\\\n",
     r"lm\.arpa:6: more 1-grams than the header's 1"),
    ("\\data\\\nngram 1=1\nngram 2=1\n\n\\1-grams:\n-1.0 cat\n\n\\2-grams:\n-1.0 dog cat\n"
     "\\end\\\n", r"lm\.arpa:9: 2-gram 'dog cat' has no parent 1-gram"),
    ("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0 cat\n-2.0 cat\n\\end\\\n",
     r"lm\.arpa:6: this 1-gram appears twice"),
    ("\\data\\\nngram 1=1\nngram 2=0\n\n\\1-grams:\n-1.0 cat -x\n\n\\2-grams:\n\\end\\\n",
     r"lm\.arpa:6: invalid backoff weight '-x'"),
    ("\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0 cat\n", r"expected '\\end\\', found the end"),
])
def test_a_bad_arpa_file_is_one_line_naming_the_file_and_line(tmp_path, text, error):
    path = tmp_path / "lm.arpa"
    path.write_text(text)
    with pytest.raises(AsrdistError, match=error) as info:
        read_arpa(path, words(), "<unk>")
    assert "\n" not in str(info.value)
    assert str(path) in str(info.value)


def test_a_corrupt_gzip_is_one_line(tmp_path):
    path = tmp_path / "lm.arpa.gz"
    path.write_bytes(b"not gzip at all")
    with pytest.raises(AsrdistError, match=r"lm\.arpa\.gz: cannot read the ARPA LM"):
        read_arpa(path, words(), "<unk>")
