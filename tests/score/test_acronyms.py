"""score_sclite.sh's stage 1 (filter, acronyms) against outputs made by Kaldi's own scripts.

tests/score/kaldi_acronyms/{s5c,fisher_swbd}.ctm were written by s5c's
local/map_acronyms_ctm.py (with the Kaldi-made acronyms.map of tests/corpus/kaldi_expected/
swbd300) and fisher_swbd's local/format_acronyms_ctm_eval2000.py from hyp.ctm: regenerate.sh.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from asrdist.errors import AsrdistError
from asrdist.score.ctm import (
    FISHER_SWBD,
    S5C,
    format_acronyms_ctm,
    kept,
    map_acronyms_ctm,
    read_acronym_map,
    recording_ctm,
)
from asrdist.score.hubscr import score_decode_dir
from tests.cli_process import run_cli

HERE = Path(__file__).parent / "kaldi_acronyms"
S5C_MAP = Path(__file__).parents[1] / "corpus" / "kaldi_expected" / "swbd300" / "acronyms.map"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def test_s5c_map_matches_kaldis_map_acronyms_ctm():
    assert map_acronyms_ctm(_lines(HERE / "hyp.ctm"), read_acronym_map(S5C_MAP)) == _lines(
        HERE / "s5c.ctm")


def test_fisher_swbd_split_matches_kaldis_format_acronyms_ctm_eval2000():
    assert format_acronyms_ctm(_lines(HERE / "hyp.ctm")) == _lines(HERE / "fisher_swbd.ctm")


def test_bad_map_line_is_refused(tmp_path):
    bad = tmp_path / "acronyms.map"
    bad.write_text("IBM\ti._b._m.\ti b m\nI\ti.\n")
    with pytest.raises(AsrdistError, match=r"acronyms.map:2"):
        read_acronym_map(bad)


@pytest.mark.parametrize("word,s5c,fisher", [
    ("hello", True, True), ("[noise]", False, False), ("[NOISE]", False, False),
    ("[laughter-yes]", False, False), ("laughter", False, False),
    ("[vocalized-noise]", False, False), ("<unk>", False, False), ("UH", False, True),
    ("uh-huh", True, True), ("dal-", False, True), ("-las", True, True), ("hmm", True, True)])
def test_filter_is_score_sclite_greps(word, s5c, fisher):
    assert kept(word, S5C) is s5c
    assert kept(word, FISHER_SWBD) is fisher


def _decode_dir(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data" / "eval2000"
    data.mkdir(parents=True)
    (data / "segments").write_text("en_4156-A_041400-041800 en_4156-A 414.00 418.00\n")
    (data / "reco2file_and_channel").write_text("en_4156-A en_4156 A\n")
    (data / "stm").write_text("en_4156 A en_4156_A 414.00 418.00 <O,en,M> u c l a i b m uh\n")
    (data / "glm").write_text(";; empty\n")
    dict_dir = tmp_path / "data" / "local" / "dict_nosp"
    dict_dir.mkdir(parents=True)
    (dict_dir / "acronyms.map").write_bytes(S5C_MAP.read_bytes())
    decode = tmp_path / "decode"
    decode.mkdir()
    (decode / "ctm").write_text(
        "en_4156-A_041400-041800 1 0.26 0.65 u._c._l._a.\n"
        "en_4156-A_041400-041800 1 1.00 0.30 i._b._m.\n"
        "en_4156-A_041400-041800 1 1.40 0.20 uh\n"
        "en_4156-A_041400-041800 1 1.70 0.20 [noise]\n")
    return data, decode


def test_decode_dir_scored_with_the_dicts_map_by_default(tmp_path):
    data, decode = _decode_dir(tmp_path)
    proc = run_cli("score", "hubscr", "--stm", data / "stm", "--glm", data / "glm", "--data",
                   data, decode)
    assert "acronyms: " in proc.stderr
    # s5c drops the hypothesis' uh: one deletion
    assert proc.stdout.splitlines()[0].startswith("%WER 12.5 | 1 8 |")
    assert (decode / "eval2000.ctm").read_text().split("\n")[0] == "en_4156 A 414.26 0.16 u"
    proc = run_cli("score", "hubscr", "--stm", data / "stm", "--glm", data / "glm", "--data", data,
                   "--acronyms", "none", decode)
    assert proc.stdout.splitlines()[0].startswith("%WER 100.0 | 1 8 |")


def test_fisher_swbd_recipe_splits_without_a_map_and_keeps_hesitations(tmp_path):
    data, decode = _decode_dir(tmp_path)
    lines = recording_ctm(decode / "ctm", data, FISHER_SWBD)
    assert [line.split()[4] for line in lines] == list("uclaibm") + ["uh"]
    with pytest.raises(AsrdistError, match="s5c"):
        recording_ctm(decode / "ctm", data, FISHER_SWBD, read_acronym_map(S5C_MAP))
    assert score_decode_dir(data / "stm", data / "glm", decode, data, recipe=FISHER_SWBD)[
        0].startswith("%WER 0.0 | 1 8 |")


def test_a_decode_dir_without_a_word_is_refused_and_an_empty_sweep_point_warned(tmp_path,
                                                                                 caplog):
    """No word in any CTM (decoding failed, or wrote no word timings) is an error, not a score
    of all deletions; one sweep point's empty CTM is scored, with a warning naming it."""
    data, decode = _decode_dir(tmp_path)
    (decode / "score_20_1.0").mkdir()
    (decode / "score_20_1.0" / "ctm").write_text("")
    scored = score_decode_dir(data / "stm", data / "glm", decode, data,
                              acronyms=read_acronym_map(S5C_MAP))
    assert scored[1].startswith("%WER 100.0 | 1 8 | 0.0 0.0 100.0 ")  # all deletions
    assert scored[-1].startswith("best: %WER 12.5 | 1 8 |")
    assert f"{decode / 'score_20_1.0' / 'ctm'}: empty CTM: scored as all deletions" in caplog.text
    (decode / "ctm").write_text("")
    with pytest.raises(AsrdistError, match=f"^{decode}: every CTM of the decode dir is empty, "
                                           "no hypothesis word to score"):
        score_decode_dir(data / "stm", data / "glm", decode, data)
