"""Switchboard, Fisher and eval2000 transcripts as Kaldi's recipes normalise them, and their ids.

Switchboard-1 (MS98) and eval2000 follow kaldi-asr/kaldi ``egs/swbd/s5c`` rule by rule, each
citing its script and line (read beside Kaldi's scripts, written here; checked against the data
dirs Kaldi's own scripts make in ``tests/corpus/kaldi_expected/swbd300``):

- ``local/swbd1_data_prep.sh``: ids ``sw02001-A_000098-001156`` (centiseconds, rounded), one
  ``[silence]`` removed where whitespace stands on both sides (so of ``[silence] [silence]`` one
  stays), the aside tags removed, then ``local/swbd1_map_words.pl`` word by word, then
  ``local/map_acronyms_transcripts.py`` with the ``acronyms.map`` that
  ``local/swbd1_prepare_dict.sh`` finds in the MS98 lexicon (``IBM`` -> ``i._b._m.``), which
  also lowercases the text.
- ``local/eval2000_data_prep.sh``: ids from the pem file with ``%06d`` of t*100 (truncated:
  1.13 s -> ``000112``), segments extended by up to 0.1 s (``local/extend_segments.pl``), the
  stm's words as they are for the text.

Switchboard-1 + Fisher follow ``egs/fisher_swbd/s5`` (checked against the data dirs its own
scripts make in ``tests/corpus/kaldi_expected/swbd2000``), which differs from s5c where noted
(``recipe="fisher_swbd"``):

- ``local/fisher_data_prep.sh``: ids ``fe_03_00001-A-000200-000434`` (hyphens, ``%06d`` of
  t*100: truncated), the words as the transcript writes them (case and inner whitespace kept),
  every line containing ``((`` dropped, six markers mapped (``[laugh]`` -> ``[laughter]``;
  ``[sigh]``, ``[cough]``, ``[mn]``, ``[breath]``, ``[lipsmack]`` -> ``[noise]``), any other
  bracketed word left as it is.
- its ``local/swbd1_map_words.pl`` removes ``_1`` only at the end of a word, and its acronym map
  (``acronyms_swbd.map``, ``local/fisher_swbd_prepare_dict.sh``) comes from the MS98 lexicon
  alone (no single letters), applied by its own ``map_acronyms_transcripts.py``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from asrdist.kaldi.recipes import FISHER_SWBD, S5C  # the Kaldi recipe a rule follows

# fisher_swbd local/fisher_data_prep.sh:137-144 (sed, each global, case-sensitive): the only
# markers it maps; any other bracketed word stays as it is.
FISHER_MARKERS = {"[laugh]": "[laughter]", "[sigh]": "[noise]", "[cough]": "[noise]",
                  "[mn]": "[noise]", "[breath]": "[noise]", "[lipsmack]": "[noise]"}
_FISHER_MARKER = re.compile("|".join(re.escape(m) for m in FISHER_MARKERS))
# fisher_data_prep.sh:121, perl on bytes (\s is ASCII whitespace); not anchored at the start
_FISHER_LINE = re.compile(r"([0-9.]+)\s+([0-9.]+) ([AB]):\s*(\S.*\S|\S)\s*$", re.ASCII)
_PERL_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")

# s5c local/swbd1_map_words.pl:33-47, in its order; each replaces the first match only.
_NOT_BRACKET = r"[^\]\[]"
MAP_WORD_RULES = [
    # :33 [laughter-story] -> story, [laughter-sto]- -> sto- (the rule's leading "(|\-)^" can
    # only match the empty string: -[laughter-yes] is left to :41, which makes it "--")
    (re.compile(r"^\[LAUGHTER-(.+)\](|-)$", re.IGNORECASE), r"\1\2"),
    # :35 [it'n/isn't] -> it'n, [lem[guini]-/linguini] -> lem[guini]- (then :41)
    (re.compile(r"^\[(.+)/.+\](|-)$"), r"\1\2"),
    # :39 -[an]y -> -y (the leading dash optional)
    (re.compile(rf"^(|-)\[{_NOT_BRACKET}+\](.+)$"), r"-\2"),
    # :41 ab[solute]- -> ab- (the trailing dash optional)
    (re.compile(rf"^(.+)\[{_NOT_BRACKET}+\](|-)$"), r"\1-"),
    # :43 ex[specially]-/especially] -> ex (not anchored at the start)
    (re.compile(rf"({_NOT_BRACKET}+)\[.+\]$"), r"\1"),
    # :45 {yuppiedom} -> yuppiedom
    (re.compile(r"^\{(.+)\}$"), r"\1"),
    # :46 ammu[n]it- -> ammn-t-: "$1-$3", $1 the last bracketed character, $3 unset
    (re.compile(rf"[A-Z]\[({_NOT_BRACKET})+\][A-Z]", re.IGNORECASE), r"\1-"),
    # :47 them_1's -> them's
    (re.compile(r"_\d"), ""),
]
# fisher_swbd's copy, line 47: "s:_\d$::" (them_1's stays them_1's)
FISHER_MAP_WORD_RULES = [*MAP_WORD_RULES[:-1], (re.compile(r"_\d$"), "")]

# s5c local/MSU_single_letter.txt: the letters' pronunciations, added to the lexicon
# (swbd1_prepare_dict.sh:40-47) and the spelling acronyms are recognised by.
LETTERS = {"A": "ey", "B": "b iy", "C": "s iy", "D": "d iy", "E": "iy", "F": "eh f",
           "G": "jh iy", "H": "ey ch", "I": "ay", "J": "jh ey", "K": "k ey", "L": "eh l",
           "M": "eh m", "N": "eh n", "O": "ow", "P": "p iy", "Q": "k y uw", "R": "aa r",
           "S": "eh s", "T": "t iy", "U": "y uw", "V": "v iy", "W": "d ah b ax l y uw",
           "X": "eh k s", "Y": "w ay", "Z": "z iy"}
# s5c local/dict.patch (applied by swbd1_prepare_dict.sh:23) corrects these entries of the
# MS98 lexicon to their spelled pronunciations, which makes them acronyms; its other changes
# make or unmake none.
DICT_PATCH_ACRONYMS = {"NAACP": "eh n ey ey s iy p iy", "NIT": "eh n ay t iy",
                       "NTSC": "eh n t iy eh s s iy"}
# swbd1_prepare_dict.sh:45-46: entries added before the words are mapped.
_DICT_EXTRA = ["!sil sil", "[vocalized-noise] spn", "[noise] nsn", "[laughter] lau", "<unk> spn"]


@functools.lru_cache(maxsize=1 << 16)
def map_word(word: str, recipe: str = S5C) -> str:
    """One word as the recipe's swbd1_map_words.pl leaves it."""
    for rx, repl in FISHER_MAP_WORD_RULES if recipe == FISHER_SWBD else MAP_WORD_RULES:
        word = rx.sub(repl, word, count=1)
    return word


def ms98_words(words: Iterable[str], recipe: str = S5C) -> list[str]:
    """An MS98 segment's words after swbd1_data_prep.sh:81-91, before the acronym map: one
    ``[silence]`` with whitespace on both sides removed per place (:82, a global perl
    substitution whose match eats the following space), ``<b_aside>``/``<e_aside>`` removed
    anywhere (:83-84), then swbd1_map_words.pl. Empty when the line goes (:86, NF > 1).
    fisher_swbd's swbd1_data_prep.sh:73-83 is the same but for its swbd1_map_words.pl."""
    line = re.sub(r"\s\[SILENCE\](\s|$)", r"\1", "x " + " ".join(words) + "\n",
                  flags=re.IGNORECASE)
    line = re.sub("<B_ASIDE>", "", line, flags=re.IGNORECASE)
    line = re.sub("<E_ASIDE>", "", line, flags=re.IGNORECASE)
    return [map_word(w, recipe) for w in line.split()[1:]]


def _spelled(word: str, phones: str) -> bool:
    return " ".join(LETTERS[c.upper()] for c in word) == phones


def _acronym(word: str, phones: str) -> tuple[str, str] | None:
    """(``i._b._m.``, ``i b m``) when the lexicon entry is an acronym, as s5c's
    local/format_acronyms_dict.py:41-99 decides: letters only (``'s`` or ``s`` may end it)
    and the phones are the letters' spelled out."""
    if not re.match(r"^[A-Za-z]+$|^[A-Za-z]+'s$|^[A-Za-z]+s$", word) or not phones:
        return None
    if word[-2:] == "'s" and phones[-1] in "sz":  # :44 IBM's -> i._b._m.'s
        stem, mapped_end, back_end = word[:-2], ".'s", "'s"
        ok = _spelled(stem, phones[:-2])
    elif word[-1] == "s" and phones[-1] in "sz":  # :64 TVs -> t._v.s
        stem, mapped_end, back_end = word[:-1], ".s", "'s"
        ok = _spelled(stem, phones[:-2])
    elif "'" not in word and word[-1] != "s":  # :84 IBM -> i._b._m.
        stem, mapped_end, back_end = word, ".", ""
        ok = _spelled(stem, phones)
    else:
        return None
    if not ok:
        return None
    low = stem.lower()
    return "._".join(low) + mapped_end, " ".join(low) + back_end


def acronym_map(ms98_lexicon: str, recipe: str = S5C) -> dict[str, tuple[str, str]]:
    """Word -> (mapped, spelled back), s5c's ``data/local/dict_nosp/acronyms.map``, from the
    MS98 lexicon ``sw-ms98-dict.text`` as swbd1_prepare_dict.sh:21-85 makes it: comment and
    empty lines dropped (:27), the extra and single-letter entries added (:45-47), the words
    mapped by swbd1_map_words.pl (:80), then format_acronyms_dict.py (:83).

    fisher_swbd's ``acronyms_swbd.map`` (fisher_swbd_prepare_dict.sh:115-137): the same from
    the lexicon alone (no extra or single-letter entries), with its swbd1_map_words.pl (:130);
    its format_acronyms_dict.py finds the same acronyms (it writes no spelled-back column)."""
    lines = [x for x in ms98_lexicon.split("\n") if not x.startswith("#") and x.split()]
    words = {x.split()[0] for x in lines}
    lines += [f"{w} {p}" for w, p in DICT_PATCH_ACRONYMS.items() if w in words]
    if recipe != FISHER_SWBD:
        lines += _DICT_EXTRA + [f"{c} {p}" for c, p in LETTERS.items()]
    out = {}
    for line in lines:
        fields = line.split()
        word = map_word(fields[0], recipe)
        found = _acronym(word, " ".join(fields[1:]))
        if found:
            out[word] = found
    return out


def write_acronym_map(amap: dict[str, tuple[str, str]], recipe: str = S5C) -> str:
    """acronyms.map's text: ``word<TAB>mapped<TAB>back`` lines, ``sort -u`` in the C locale
    (swbd1_prepare_dict.sh:84); fisher_swbd's acronyms_swbd.map has ``word<TAB>mapped`` lines
    (its format_acronyms_dict.py:57, fisher_swbd_prepare_dict.sh:137)."""
    if recipe == FISHER_SWBD:
        lines = {f"{w}\t{m}\n" for w, (m, _) in amap.items()}
    else:
        lines = {f"{w}\t{m}\t{b}\n" for w, (m, b) in amap.items()}
    return "".join(sorted(lines, key=str.encode))


def acronyms_applied(amap: dict[str, tuple[str, str]]) -> bool:
    """Whether map_acronyms_transcripts.py gets past its start: it deletes the map's ``I`` and
    ``i`` (s5c :26-27, fisher_swbd :26-27) and stops with a KeyError, before writing anything,
    when either is missing; swbd1_data_prep.sh's ``mv`` then fails and the text stays as
    swbd1_map_words.pl left it (s5c's map always has ``I``, from its single letters;
    fisher_swbd's only when the MS98 lexicon has an upper-case ``I``)."""
    return "I" in amap and "i" in amap


class AcronymMapError(ValueError):
    """map_acronyms_transcripts.py would stop on this line with a KeyError."""


def map_acronyms(words: list[str], amap: dict[str, tuple[str, str]], recipe: str = S5C
                 ) -> list[str]:
    """s5c's local/map_acronyms_transcripts.py on a line's words: ``I`` with single capital
    letters beside it maps with them (:36-48), then every other word in the map but ``I``/``i``
    (:51-53), then the words are lowercased (:54-55). fisher_swbd's copy (``recipe``) looks
    for a lower-case ``i`` in its first pass (:37). A capital letter beside it that the map
    lacks stops the script (KeyError, :48): AcronymMapError."""
    items = ["<utt>", *words]  # the script works on the line, id first
    n = len(items)
    first = "i" if recipe == FISHER_SWBD else "I"
    for i in range(n):
        if items[i] == first:
            x = 0
            while i - 1 - x >= 0 and re.match(r"^[A-Z]$", items[i - 1 - x]):
                x += 1
            y = 0
            while i + 1 + y < n and re.match(r"^[A-Z]$", items[i + 1 + y]):
                y += 1
            if x + y > 0:
                for bias in range(-x, y + 1):
                    if items[i + bias] not in amap:
                        raise AcronymMapError(items[i + bias])
                    items[i + bias] = amap[items[i + bias]][0]
    for i in range(n):
        if items[i] in amap and items[i] not in ("I", "i"):
            items[i] = amap[items[i]][0]
    return " ".join(items[1:]).lower().split()


def swbd_utt_id(ms98_segment_id: str, start: float, end: float) -> str:
    """``sw02001-A_000098-001156`` from ``sw2001A-ms98-a-0001`` and its times: its first six
    characters with ``sw0`` for ``sw``, the seventh, then ``int(100*t+0.5)`` as ``%06.0f``
    (swbd1_data_prep.sh:62-68)."""
    name = re.sub("^sw", "sw0", ms98_segment_id[:6])
    return (f"{name}-{ms98_segment_id[6:7]}_{int(100 * start + 0.5):06d}"
            f"-{int(100 * end + 0.5):06d}")


def awk_number(value: float) -> str:
    """A number as awk's ``print`` writes it: an integral value as an integer, others with
    ``OFMT`` ``%.6g`` (the times of s5c's train segments, swbd1_data_prep.sh:101-106)."""
    if value == int(value) and abs(value) < 1e16:
        return str(int(value))
    return f"{value:.6g}"


def swbd_segment_times(utt: str) -> tuple[str, str]:
    """The times of a Switchboard segments line, from the id: ``startf/100`` and ``endf/100``
    printed by awk (swbd1_data_prep.sh:101-106): ``sw02001-A_000100-000211`` -> 1, 2.11."""
    start, end = re.split("[_-]", utt)[2:4]
    return awk_number(int(start) / 100), awk_number(int(end) / 100)


def truncated_centiseconds(field: str) -> int:
    """``sprintf("%06d", $4*100)`` of eval2000_data_prep.sh:70 and :81: truncated, so 1.13 s
    (112.99999... centiseconds) is ``000112``."""
    return int(float(field) * 100)


def extend_segments(rows: list[tuple[str, str, str, str]], extend: float
                    ) -> list[tuple[str, str, str, str]]:
    """s5c's local/extend_segments.pl (eval2000_data_prep.sh:72 runs it with 0.1): per
    recording, in order of start (a stable sort), the first start moves ``extend`` earlier (not
    below 0), the last end ``extend`` later, and each gap between neighbours closes by up to
    ``extend`` from both sides, at most half the gap; overlapping neighbours stay as they are.
    The times are written ``%.2f``, the lines stay in their order."""
    starts = [float(r[2]) for r in rows]
    ends = [float(r[3]) for r in rows]
    by_reco: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_reco.setdefault(r[1], []).append(i)
    for lines in by_reco.values():
        order = sorted(lines, key=lambda i: starts[i])
        first, last = order[0], order[-1]
        t = starts[first] - extend
        starts[first] = t if t >= 0.0 else 0.0
        ends[last] = ends[last] + extend
        for a, b in zip(order, order[1:], strict=False):
            tend, tstart = ends[a], starts[b]
            if tend > tstart:
                continue
            step = min(extend, 0.5 * (tstart - tend))
            ends[a], starts[b] = tend + step, tstart - step
    return [(r[0], r[1], f"{s:.2f}", f"{e:.2f}")
            for r, s, e in zip(rows, starts, ends, strict=True)]


def perl_split(text: str) -> list[str]:
    """``split(" ", $line)`` in perl on bytes (remove_dup_utts.sh): ASCII whitespace only."""
    return [w for w in _PERL_WHITESPACE.split(text) if w]


def _perl_number(field: str) -> float:
    """A ``[0-9.]+`` field as perl numifies it: its leading number (``1.2.3`` -> 1.2)."""
    m = re.match(r"\d+\.?\d*|\.\d+", field)
    return float(m.group()) if m else 0.0


def fisher_line(line: str) -> tuple[str, str, str] | None:
    """(``000200-000434``, side, words) of a Fisher transcript line as fisher_data_prep.sh:121-128
    reads it: ``start end A: words``, the times as ``%06d`` of t*100 (truncated), the words
    from their first to their last non-blank character as written; None when the line does
    not match (headers, empty lines, a line without words). ValueError: an end time of more
    than 6 digits (:124 dies)."""
    m = _FISHER_LINE.search(line)
    if not m:
        return None
    start, end = (f"{int(_perl_number(t) * 100.0):06d}" for t in m.group(1, 2))  # :122-123
    if len(end) > 6:
        raise ValueError(f"time too long {end}")
    return f"{start}-{end}", m.group(3), m.group(4)


def fisher_text(words: str) -> str | None:
    """A Fisher line's words after fisher_data_prep.sh:136-144: None when the line contains
    ``((`` (grep -v), else the six markers mapped (inside words too, case-sensitive)."""
    if "((" in words:
        return None
    return _FISHER_MARKER.sub(lambda m: FISHER_MARKERS[m.group()], words)


def centiseconds(seconds: float) -> int:
    """Kaldi's rounding of a segment time to the 10 ms of its id."""
    return int(100 * seconds + 0.5)


def utt_id(recording: str, channel: str, start: float, end: float) -> str:
    """``sw02001-A_000098-001156``: recording-channel, start and end in centiseconds."""
    return f"{recording}-{channel}_{centiseconds(start):06d}-{centiseconds(end):06d}"


def swbd_recording(ms98_segment_id: str) -> tuple[str, str]:
    """MS98 ``sw2001A-ms98-a-0001`` -> (``sw02001``, ``A``): Kaldi pads the number to 5 digits."""
    m = re.fullmatch(r"sw(\d{4})([AB])-ms98-a-\d+", ms98_segment_id)
    if not m:
        raise ValueError(ms98_segment_id)
    return f"sw0{m.group(1)}", m.group(2)


def speed_prefix(factor: float) -> str:
    """``sp0.9-``, ``sp1.0-``: Kaldi's perturb_data_dir_speed.sh prefix for a speed factor."""
    return f"sp{float(factor)}-"
