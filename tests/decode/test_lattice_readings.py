"""Texts and CTMs read off lattices made elsewhere (asrdist-lmrescore's) equal Kaldi's
lattice-best-path and lattice-1best | lattice-align-words-lexicon | nbest-to-ctm on the same
lattices (kaldi_expected/rescored.1.bin, make_lmrescore_expected.sh)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from asrdist.decode.lattice_readings import write_readings
from asrdist.decode.lmrescore import iter_lattice_archive
from asrdist.errors import AsrdistError
from tests.decode.test_decode_dir import _decode

EXPECTED = Path(__file__).parent / "kaldi_expected"


def test_readings_of_rescored_lattices_equal_kaldis(tmp_path):
    words = {i: w for w, i in (line.split() for line in
                               (EXPECTED / "words.txt").read_text().splitlines())}
    (tmp_path / "data").mkdir()  # no frame_shift file: Kaldi's 10 ms
    write_readings(tmp_path / "out", iter_lattice_archive(EXPECTED / "rescored.1.bin"),
                   tmp_path / "data", EXPECTED / "words.txt", EXPECTED / "final.mdl",
                   EXPECTED / "phones" / "align_lexicon.int", (5, 9, 13, 17), (0.0, 0.5, 1.0))
    out = tmp_path / "out"
    texts: dict[str, list[str]] = {}
    for line in (EXPECTED / "rescored_sweep.txt").read_text().splitlines():
        lmwt, wip, utt, *ids = line.split()
        texts.setdefault(f"score_{lmwt}_{wip}", []).append(
            " ".join([utt, *(words[i] for i in ids)]))
    ctms: dict[str, list[str]] = {}
    for line in (EXPECTED / "rescored_sweep_ctm.txt").read_text().splitlines():
        lmwt, wip, utt, channel, start, duration, word = line.split()
        ctms.setdefault(f"score_{lmwt}_{wip}", []).append(
            f"{utt} {channel} {start} {duration} {words[word]}")
    assert sorted(ctms) == sorted(texts) and len(texts) == 12
    for point in texts:
        assert (out / point / "text").read_text().splitlines() == sorted(texts[point])
        assert (out / point / "ctm").read_text().splitlines() == sorted(ctms[point])
    assert (out / "text").is_file() and (out / "ctm").is_file()  # LMWT 1/acwt = 10
    assert (out / "words.txt").read_text() == (EXPECTED / "words.txt").read_text()


def test_without_word_alignment_only_texts(tmp_path):
    write_readings(tmp_path, iter_lattice_archive(EXPECTED / "rescored.1.bin"), tmp_path,
                   EXPECTED / "words.txt", None, None, (10,), (0.0,))
    assert (tmp_path / "score_10_0.0" / "text").is_file()
    assert not (tmp_path / "score_10_0.0" / "ctm").exists() and not (tmp_path / "ctm").exists()


def test_readings_equal_asrdist_decodes_own(tmp_path):
    """Read off a decode dir's own lattices, every text and CTM is the one asrdist-decode
    wrote beside them, byte for byte."""
    decoded = tmp_path / "decode"
    _decode(tmp_path, decoded)
    lattices = iter_lattice_archive(decoded / "lat.1.gz")
    write_readings(tmp_path / "read", lattices, tmp_path / "data", EXPECTED / "words.txt",
                   EXPECTED / "final.mdl", EXPECTED / "phones" / "align_lexicon.int",
                   tuple(range(5, 18)), (0.0, 0.5, 1.0))
    made = sorted(p.relative_to(decoded) for p in decoded.rglob("*")
                  if p.name in ("text", "ctm", "words.txt"))
    assert len(made) == 2 * 40 + 1
    for name in made:
        assert (tmp_path / "read" / name).read_bytes() == (decoded / name).read_bytes(), name


def test_lattices_are_read_one_at_a_time(tmp_path):
    """A test set's lattices are not held together: when a lattice is asked for, none but the
    last one given (the reader's loop variable) is still held; an utterance twice is one line
    naming it."""
    lattices = list(iter_lattice_archive(EXPECTED / "rescored.1.bin"))
    assert len(lattices) > 2
    alive: list[weakref.ref] = []

    def stream():
        while lattices:
            gc.collect()
            assert all(ref() is None for ref in alive[:-1]), "an earlier lattice is held"
            key, clat = lattices.pop(0)
            alive.append(weakref.ref(clat))
            yield key, clat
            del clat

    write_readings(tmp_path / "out", stream(), tmp_path, EXPECTED / "words.txt", None, None,
                   (10,), (0.0,))
    assert len((tmp_path / "out" / "text").read_text().splitlines()) == len(alive)
    twice = list(iter_lattice_archive(EXPECTED / "rescored.1.bin"))[:1] * 2
    with pytest.raises(AsrdistError, match=f"utterance {twice[0][0]} has two lattices"):
        write_readings(tmp_path / "twice", twice, tmp_path, EXPECTED / "words.txt", None, None,
                       (10,), (0.0,))
