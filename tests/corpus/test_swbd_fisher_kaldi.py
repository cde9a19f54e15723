"""asrdist's route-2 Switchboard + Fisher data prep (recipes/swbd2000) against the data dirs
Kaldi's own egs/fisher_swbd/s5 scripts made from the same fixture tree
(tests/corpus/kaldi_expected/swbd2000, remade by its regenerate.sh): byte for byte, nothing
derived from asrdist."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from asrdist.corpus.swbd import fisher_lines, switchboard
from asrdist.corpus.swbd_prepare import SwbdOptions, prepare_swbd
from asrdist.kaldi.data_dir import read_table
from asrdist.kaldi.recipes import FISHER_SWBD
from tests.corpus.ldc_fixture import make_prep_tree
from tests.corpus.test_swbd_kaldi import FILES, _first_difference

KALDI = Path(__file__).parent / "kaldi_expected" / "swbd2000"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return make_prep_tree(tmp_path_factory.mktemp("fisher_kaldi") / "ldc")


@pytest.fixture(scope="module")
def prepared(tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("fisher_kaldi_data")
    prepare_swbd(out, SwbdOptions(
        str(tree.swbd_audio), str(tree.ms98), str(tree.eval2000_audio), str(tree.eval2000_ref),
        (str(tree.fisher_audio), str(tree.fisher_audio2)),
        (str(tree.fisher_text), str(tree.fisher_text2)), max_dup=300,
        speed_factors=(0.9, 1.0, 1.1), allow_partial=True))  # the fixture is a small corpus
    return out


def _same(ours: bytes, kaldi: bytes, what: str) -> None:
    assert ours == kaldi, f"{what}: {_first_difference(ours, kaldi)}"


@pytest.mark.parametrize("name", ["train_swbd", "train", "train_nodup", "train_nodup_sp",
                                  "eval2000"])
def test_data_dir_is_fisher_swbds_byte_for_byte(prepared, name):
    for f in FILES + (["stm", "glm"] if name == "eval2000" else []):
        _same((prepared / name / f).read_bytes(), (KALDI / name / f).read_bytes(), f"{name}/{f}")


def test_fisher_text_segments_and_speakers_are_fisher_data_preps(tree):
    """data/train_fisher as fisher_data_prep.sh writes it, before run.sh drops the call without
    audio: the text, segments and utt2spk of every transcript."""
    segs = fisher_lines([str(tree.fisher_text), str(tree.fisher_text2)], allow_partial=True)
    ours = {
        "text": "".join(f"{s.utt} {s.text}\n" for s in segs).encode("latin-1"),
        "segments": "".join(f"{s.utt} {s.reco} {' '.join(s.shown())}\n" for s in segs).encode(),
        "utt2spk": "".join(f"{s.utt} {s.speaker}\n" for s in segs).encode(),
    }
    for f, data in ours.items():
        _same(data, (KALDI / "train_fisher" / f).read_bytes(), f"train_fisher/{f}")


def test_acronym_map_is_fisher_swbds(prepared):
    _same((prepared / "local" / "dict_nosp" / "acronyms_swbd.map").read_bytes(),
          (KALDI / "acronyms_swbd.map").read_bytes(), "acronyms_swbd.map")


def test_the_kaldi_dirs_hold_the_awkward_cases():
    """What the comparison covers, read from Kaldi's output (so a fixture change that loses a
    case shows here)."""
    rows = (KALDI / "train_fisher" / "text").read_text().splitlines()
    fisher = [r.split(" ", 1)[0] for r in rows]
    texts = {r.split(" ", 1)[1] for r in rows}
    assert fisher.count("fe_03_00001-A-030200-030300") == 2  # one id, two lines
    assert not any("((" in t for t in texts)
    assert {"[laughter] that is funny", "oh[laughter] yeah", "[noise] [noise] well",
            "[sneeze] excuse me", "[[laughter]] no", "[laugh", "uh [Laugh] no",
            "I think T.V. is fine"} <= texts
    assert "yeah  yeah" in texts and "tab\there too" in texts  # kept as written
    assert "fe_03_05853-A" in {u.rsplit("-", 2)[0] for u in fisher}  # no audio: dropped later
    segs = read_table(KALDI / "train" / "segments")
    assert segs["fe_03_00001-A-030200-030300"] == "fe_03_00001-A 302.00 303.00"
    assert read_table(KALDI / "train" / "text")["fe_03_00001-A-030200-030300"] == "and that"
    assert "fe_03_00001-A-030000-030005" in fisher and "fe_03_00001-A-030000-030005" not in segs
    assert not any(u.startswith("fe_03_05853") for u in segs)
    train = Counter(read_table(KALDI / "train" / "text").values())
    kept = Counter(read_table(KALDI / "train_nodup" / "text").values())
    assert train["mhm"] > 300 and train["uh-huh"] > 300 and train["sure"] == 300
    assert kept["sure"] == 300 and kept["mhm"] < train["mhm"]
    sp = read_table(KALDI / "train_nodup_sp" / "utt2spk")
    assert sp["fe_03_00001-A-000129-000179"] == "fe_03_00001-A"  # the 1.0 copy unprefixed
    assert sp["sp0.9-fe_03_00001-A-000129-000179"] == "sp0.9-fe_03_00001-A"
    ev = read_table(KALDI / "eval2000" / "segments")
    assert ev["en_4156-A_000005-000112"] == "en_4156-A 0.05 1.13"  # not extended


def test_a_lexicon_without_upper_case_i_leaves_the_text_unmapped(tree, tmp_path):
    """The real MS98 lexicon is in lower case: fisher_swbd's map_acronyms_transcripts.py then
    stops (KeyError 'I') and swbd1_data_prep.sh keeps swbd1_map_words.pl's text; Kaldi's own
    run of it on the fixture with its "I ay" line removed (lexicon_without_I/)."""
    ms98 = tmp_path / "ms98"
    shutil.copytree(tree.ms98, ms98)
    lexicon = ms98 / "sw-ms98-dict.text"
    lexicon.write_text("".join(x for x in lexicon.read_text().splitlines(keepends=True)
                               if x != "I ay\n"))
    swbd = switchboard(str(tree.swbd_audio), str(ms98), FISHER_SWBD, allow_partial=True)
    kaldi = read_table(KALDI / "lexicon_without_I" / "train_swbd" / "text")
    assert len(swbd.segments) > 2000
    assert {s.utt: s.text for s in swbd.segments} == {s.utt: kaldi[s.utt] for s in swbd.segments}
    assert any(" A 0" in t for t in kaldi.values())  # not lower-cased: unmapped
