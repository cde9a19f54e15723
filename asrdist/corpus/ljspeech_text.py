"""LJSpeech-1.1's metadata.csv read, and its transcripts normalised into recipe words.

metadata.csv has one clip a line, ``ID|transcription|normalized transcription``. The third
column is used: the publisher has already spelled out its numbers, ordinals, dates and
abbreviations ("1469" -> "fourteen sixty-nine", "Mr." -> "Mister"), which is what the reader
said. On top of it, for a lexicon of whole words and an n-gram LM over them:

- Letters with accents lose them (NFKD, then ASCII: "Müller" -> "MULLER"), everything is upper
  case (CMUdict's words are case-free; Kaldi's English recipes write upper case).
- Hyphens and dashes separate words ("fourteen sixty-nine" -> "FOURTEEN SIXTY NINE"): CMUdict
  has few hyphenated compounds, and both halves are said.
- An apostrophe inside a word is kept ("PRINTER'S", "DON'T": CMUdict has such entries and they
  are said differently from the bare word); one at a word's edge is a quotation mark, dropped.
- Every other character that is not a letter (punctuation, quotes, brackets) separates words
  and is dropped; runs of spaces collapse.

Worked through in tests/corpus/test_ljspeech.py.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import read_utf8

_NOT_WORD = re.compile(r"[^A-Z']+")
_CLIP_ID = re.compile(r"LJ\d{3}-\d{4}")


@dataclass(frozen=True)
class Clip:
    """One line of metadata.csv: its id, its chapter ("LJ002") and its normalised words."""

    clip_id: str
    words: str

    @property
    def chapter(self) -> str:
        return self.clip_id.split("-")[0]


def normalize_text(text: str) -> str:
    """The normalised column of metadata.csv -> space-separated upper-case words."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = (w.strip("'") for w in _NOT_WORD.split(ascii_text.upper()))
    return " ".join(w for w in words if w)


def read_metadata(path: str | Path) -> dict[str, Clip]:
    """Every clip of a metadata.csv (with or without audio), in file order.

    A line that is not ``ID|text|normalized``, an id not like LJ001-0001, a duplicate id or a
    clip whose text normalises to nothing is one error naming the file and line.
    """
    path = Path(path)
    clips: dict[str, Clip] = {}
    for number, line in enumerate(read_utf8(path).splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|")
        where = f"{path}:{number}"
        if len(fields) != 3:
            raise AsrdistError(f"{where}: expected ID|transcription|normalized transcription, "
                               f"got {len(fields)} fields")
        clip_id = fields[0].strip()
        if not _CLIP_ID.fullmatch(clip_id):
            raise AsrdistError(f"{where}: clip id {clip_id!r} is not like LJ001-0001")
        if clip_id in clips:
            raise AsrdistError(f"{where}: clip {clip_id} listed twice")
        words = normalize_text(fields[2])
        if not words:
            raise AsrdistError(f"{where}: clip {clip_id} has no words after normalisation")
        clips[clip_id] = Clip(clip_id, words)
    if not clips:
        raise AsrdistError(f"{path}: no clips listed")
    return clips
