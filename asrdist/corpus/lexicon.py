"""A Kaldi dict dir (data/local/dict) whose pronunciations are espeak-ng's own phonemes.

The synthetic speech is made by espeak, so its phoneme strings are the true pronunciations.
espeak writes stress marks and allophone tags into its ASCII phoneme names; they are stripped so
that each phone is one clean, Kaldi-safe symbol.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from asrdist.corpus.espeak import get_espeak
from asrdist.errors import AsrdistError
from asrdist.fsutil import staged_dir
from asrdist.kaldi.data_dir import c_sorted

SILENCE_PHONE = "SIL"
OOV_PHONE = "SPN"
OOV_WORD = "<unk>"
SILENCE_WORD = "!SIL"
# Stress and syllable marks, and '#' / ';' which tag allophones ("I#", "l;") of one phone.
_MARKS = str.maketrans("", "", "',%=;#_|")

Lexicon = dict[str, list[tuple[str, ...]]]


def normalize_phones(names: Iterable[str]) -> tuple[str, ...]:
    """espeak phoneme names -> clean phone symbols (marks stripped, empty names dropped)."""
    phones = []
    for name in names:
        phone = name.translate(_MARKS)
        if phone:
            if phone in (SILENCE_PHONE, OOV_PHONE) or phone == "<eps>":
                raise AsrdistError(f"espeak phone {name!r} collides with a reserved symbol")
            phones.append(phone)
    return tuple(phones)


def build_lexicon(words: Iterable[str], languages: Iterable[str] = ("en-us",)) -> Lexicon:
    """Pronounce every word with each espeak language; keeps the distinct pronunciations.

    Raises AsrdistError naming the word when espeak gives it no phonemes.
    """
    engine = get_espeak()
    languages = list(languages)
    lexicon: Lexicon = {}
    for word in c_sorted(set(words)):
        prons: list[tuple[str, ...]] = []
        for language in languages:
            pron = normalize_phones(engine.phonemes(word, language))
            if not pron:
                raise AsrdistError(f"espeak-ng ({language}) gives no phonemes for word {word!r}")
            if pron not in prons:
                prons.append(pron)
        lexicon[word] = prons
    return lexicon


def write_dict_dir(lexicon: Lexicon, dict_dir: str | os.PathLike) -> None:
    """Write a Kaldi dict dir (lexicon.txt, silence/nonsilence/optional_silence phones).

    The directory appears complete or not at all (written beside it, then renamed).
    """
    phones = c_sorted({p for prons in lexicon.values() for pron in prons for p in pron})
    entries = [f"{SILENCE_WORD} {SILENCE_PHONE}", f"{OOV_WORD} {OOV_PHONE}"]
    entries += [f"{w} {' '.join(pron)}" for w in c_sorted(lexicon) for pron in lexicon[w]]
    files = {
        "lexicon.txt": entries,
        "silence_phones.txt": [SILENCE_PHONE, OOV_PHONE],
        "optional_silence.txt": [SILENCE_PHONE],
        "nonsilence_phones.txt": phones,
        "extra_questions.txt": [],
    }
    with staged_dir(dict_dir) as tmp:
        for name, lines in files.items():
            Path(tmp, name).write_text("".join(line + "\n" for line in lines))
