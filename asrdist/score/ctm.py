"""From a decode dir's CTM to the one Kaldi's local/score_sclite.sh hands hubscr.pl.

asrdist-decode writes times relative to each utterance (``utt 1 start dur word``); NIST
scoring wants them relative to the recording, with the LDC file id and channel
(``en_4156 A 12.34 0.20 word``): Kaldi's ``utils/convert_ctm.pl`` with the data dir's
``segments`` and ``reco2file_and_channel``. Then score_sclite.sh's stage 1, which differs
between the two Kaldi recipes (``recipe``):

- egs/swbd/s5c (``s5c``, score_sclite.sh:72-80): ``grep -i -v`` drops every line with
  ``[NOISE``, ``LAUGHTER``, ``VOCALIZED-NOISE]`` or ``<UNK>`` in it, every line ending in a
  hesitation (`` (UH|UM|...)$``) or in ``-`` (partial words); then
  ``local/map_acronyms_ctm.py -M data/local/dict_nosp/acronyms.map`` splits each word that is
  the second column of the map into the letters of its third (``u._c._l._a.`` -> ``u c l a``),
  the word's duration shared among them;
- egs/fisher_swbd/s5 (``fisher_swbd``, its score_sclite.sh:70-80): only the first two greps,
  then ``local/format_acronyms_ctm_eval2000.py`` (no map): every word with a ``.`` in it is
  split at ``._``, its last piece's ``.'s`` / ``.s`` made ``'s`` and its dots removed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.data_dir import read_table
from asrdist.kaldi.recipes import FISHER_SWBD, S5C

RECIPES = (S5C, FISHER_SWBD)
# where each recipe's dict keeps its map, relative to the data dir's parent (data/)
ACRONYM_MAPS = {S5C: "local/dict_nosp/acronyms.map",
                FISHER_SWBD: "local/dict_nosp/acronyms_swbd.map"}
# s5c score_sclite.sh:76-77's alternations (grep -i -E)
HESITATIONS = {"uh", "um", "eh", "mm", "hm", "ah", "huh", "ha", "er", "oof", "hee", "ach", "eee",
               "ew"}
# score_sclite.sh:74-75: '\[NOISE|LAUGHTER|VOCALIZED-NOISE\]' and '<UNK>', anywhere in the line
DROPPED_PARTS = ("[noise", "laughter", "vocalized-noise]", "<unk>")

AcronymMap = dict[str, list[str]]


def kept(word: str, recipe: str = S5C) -> bool:
    """Whether score_sclite.sh's greps keep the ctm line of a hypothesis word (the other
    fields, a file id, a channel and numbers, hold none of the patterns)."""
    w = word.lower()
    if any(part in w for part in DROPPED_PARTS):
        return False
    return recipe != S5C or (w not in HESITATIONS and not word.endswith("-"))


def read_acronym_map(path: str | os.PathLike) -> AcronymMap:
    """s5c's ``acronyms.map`` as map_acronyms_ctm.py reads it: tab-separated ``IBM``,
    ``i._b._m.``, ``i b m``; the second field maps to the third's words (a later line wins)."""
    amap: AcronymMap = {}
    try:
        text = Path(path).read_text(encoding="latin-1")
    except OSError as e:
        raise AsrdistError(f"--acronyms {path}: cannot read the acronym map ({e.strerror})"
                           ) from e
    for n, line in enumerate(text.splitlines(), 1):
        items = line.split("\t")
        if len(items) < 3 or not items[2].split():
            # map_acronyms_ctm.py stops at such a line (IndexError)
            raise AsrdistError(f"--acronyms {path}:{n}: expected 'WORD<tab>w._o._r._d.<tab>"
                               f"w o r d' (s5c's acronyms.map), got {line!r}")
        amap[items[1]] = items[2].split()
    return amap


def _split_line(fields: list[str], letters: list[str]) -> list[str]:
    """map_acronyms_ctm.py's arithmetic: the duration and start rounded to centiseconds,
    each letter but the last given the rounded share, the last what is left."""
    period = round(float(fields[3]), 2)
    slot = round(period / len(letters), 2)
    start = round(float(fields[2]), 2)
    head = " ".join(fields[:2])
    out = []
    for letter in letters[:-1]:
        out.append(f"{head} {start:.2f} {slot:.2f} {letter}")
        start = start + slot
    out.append(f"{head} {start:.2f} {period - slot * (len(letters) - 1):.2f} {letters[-1]}")
    return out


def map_acronyms_ctm(lines: Iterable[str], amap: AcronymMap) -> list[str]:
    """s5c's local/map_acronyms_ctm.py over recording-relative ctm lines: a word that is a
    key of the map becomes its letters, one line each (other columns after the word go);
    other lines stay as they are."""
    out = []
    for line in lines:
        fields = line.split()
        letters = amap.get(fields[4])
        out.extend(_split_line(fields, letters) if letters else [line])
    return out


def format_acronyms_ctm(lines: Iterable[str]) -> list[str]:
    """fisher_swbd's local/format_acronyms_ctm_eval2000.py: a word with a ``.`` in it is split
    at ``._``; its last piece's ``.'s`` and then ``.s`` become ``'s`` and its dots go."""
    out = []
    for line in lines:
        fields = line.split()
        if "." not in fields[4]:
            out.append(line)
            continue
        letters = fields[4].split("._")
        last = re.sub(r"\.s", "'s", re.sub(r"\.'s", "'s", letters[-1]))
        out.extend(_split_line(fields, [*letters[:-1], last.replace(".", "")]))
    return out


def default_acronym_map(data_dir: str | os.PathLike, recipe: str = S5C) -> Path | None:
    """The recipe dict's map beside a test data dir (``data/eval2000`` ->
    ``data/local/dict_nosp/acronyms.map``) when it exists; s5c's only (fisher_swbd scores
    without one)."""
    if recipe != S5C:
        return None
    path = Path(data_dir).parent / ACRONYM_MAPS[S5C]
    return path if path.is_file() else None


def recording_ctm(ctm: str | os.PathLike, data_dir: str | os.PathLike, recipe: str = S5C,
                  acronyms: AcronymMap | None = None) -> list[str]:
    """Utterance-relative CTM lines -> ``file chan start dur word`` lines, sorted, filtered and
    their acronyms split as the recipe's score_sclite.sh does (s5c: with ``acronyms``, its
    map; none: no mapping)."""
    if recipe not in RECIPES:
        raise AsrdistError(f"unknown scoring recipe {recipe!r} (expected one of "
                           f"{', '.join(RECIPES)})")
    if acronyms is not None and recipe != S5C:
        raise AsrdistError("an acronym map is s5c's: fisher_swbd's scoring splits every "
                           "dotted word without one")
    data_dir = Path(data_dir)
    segments = read_table(data_dir / "segments", require_value=True)
    reco2fc = read_table(data_dir / "reco2file_and_channel", require_value=True)
    out = []
    for n, line in enumerate(Path(ctm).read_text().splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 5 or fields[0] not in segments:
            raise AsrdistError(f"{ctm}:{n}: utterance {fields[0]!r} is not in "
                               f"{data_dir / 'segments'}")
        reco, start = segments[fields[0]].split()[:2]
        file, chan = reco2fc[reco].split()[:2]
        if kept(fields[4], recipe):
            t = float(start) + float(fields[2])
            out.append((file, chan, t, f"{file} {chan} {t:.2f} {fields[3]} {fields[4]}"))
    lines = [line for *_, line in sorted(out, key=lambda x: (x[0], x[1], x[2]))]
    if recipe == FISHER_SWBD:
        return format_acronyms_ctm(lines)
    return map_acronyms_ctm(lines, acronyms) if acronyms else lines


def write_recording_ctm(ctm: str | os.PathLike, data_dir: str | os.PathLike,
                        dest: str | os.PathLike, recipe: str = S5C,
                        acronyms: AcronymMap | None = None) -> Path:
    """Write :func:`recording_ctm` to ``dest``."""
    with atomic_write(dest) as f:
        f.writelines(line + "\n" for line in recording_ctm(ctm, data_dir, recipe, acronyms))
    return Path(dest)
