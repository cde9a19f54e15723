from __future__ import annotations

from pathlib import Path

import pytest

from asrdist.corpus.lexicon import build_lexicon, normalize_phones, write_dict_dir
from asrdist.errors import AsrdistError


def test_normalize_strips_stress_and_allophone_marks():
    assert normalize_phones(["h", "@", "l", "'oU"]) == ("h", "@", "l", "oU")
    assert normalize_phones([",E", "I#", "l;", "%a", "'"]) == ("E", "I", "l", "a")


def test_lexicon_phones_are_kaldi_safe():
    lexicon = build_lexicon(["hello", "thought", "church", "banana"], ["en-us", "en"])
    assert set(lexicon) == {"hello", "thought", "church", "banana"}
    phones = {p for prons in lexicon.values() for pron in prons for p in pron}
    for phone in phones:
        assert phone and not phone.startswith("#") and phone != "<eps>"
        assert not any(c.isspace() for c in phone) and "'" not in phone
    assert lexicon["hello"][0] == ("h", "@", "l", "oU")
    assert len(lexicon["banana"]) == 2  # en-us and en pronounce it differently


def test_word_without_phonemes_is_named():
    with pytest.raises(AsrdistError, match="no phonemes for word '...'"):
        build_lexicon(["hello", "..."])


def test_dict_dir_files(tmp_path: Path):
    write_dict_dir({"dog": [("d", "0", "g")], "cat": [("k", "a", "t")]}, tmp_path / "dict")
    d = tmp_path / "dict"
    assert (d / "lexicon.txt").read_text().splitlines() == [
        "!SIL SIL", "<unk> SPN", "cat k a t", "dog d 0 g"]
    assert (d / "silence_phones.txt").read_text().split() == ["SIL", "SPN"]
    assert (d / "optional_silence.txt").read_text().split() == ["SIL"]
    assert (d / "nonsilence_phones.txt").read_text().split() == ["0", "a", "d", "g", "k", "t"]
