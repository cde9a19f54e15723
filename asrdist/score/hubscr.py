"""Scoring a CTM against an STM and a GLM the way NIST hubscr.pl (hub5, English) does.

Kaldi's ``local/score_sclite.sh`` runs ``hubscr.pl -V -l english -h hub5 -g GLM -r STM CTM``:
both files are sorted, filtered through csrfilt.sh with the GLM (:mod:`asrdist.score.glm`),
and sclite aligns them with ``-D -F``. This module repeats sclite's steps so that its
``Sum/Avg`` numbers are hubscr's, exactly:

- hypothesis words go to the stm segments of their file and channel in time order: a word
  (or a GLM alternation, by its latest word) belongs to the current segment while its midpoint
  is before the segment's end; the channel's last segment takes the rest;
  ``IGNORE_TIME_SEGMENT_IN_SCORING`` segments drop their words and are not counted;
- reference and hypothesis are networks (GLM alternatives ``{ A / B C / @ }``, ``@`` empty);
  the dynamic programme runs over their arcs with sclite's costs (substitution 4, insertion or
  deletion 3, an optionally deletable ``(word)`` 2, an ``@`` 0.001) and sclite's tie-breaks
  (a substitution wins ties, a deletion must be strictly cheaper than an insertion);
- ``-D``: a deleted ``(word)`` counts as correct; ``-F``: a fragment ``dal-`` or ``-las``
  matches any word that it begins or ends.

A sweep (score_sclite.sh: every LM weight x penalty, each for the set and its two subsets)
reads and filters the stm once (:class:`Reference`), aligns each channel once for the set and
both subsets, and aligns a segment again only when its hypothesis differs from one seen at
another sweep point.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.recipes import S5C
from asrdist.score.align_text import ErrorCounts
from asrdist.score.ctm import AcronymMap, write_recording_ctm
from asrdist.score.glm import Glm, filter_text, read_glm

IGNORE = ("IGNORE_TIME_SEGMENT_IN_SCORING", "IGNORETIMESEGMENTINSCORING")
# sclite's word-to-word costs; it sums them in C floats, and the rounding of the '@' cost
# decides some ties, so the sums here are float32 too.
SUB, INDEL, OPT_DEL, NULL_SUB = (np.float32(c) for c in (4.0, 3.0, 2.0, 1.0))
NULL_INDEL, ZERO = np.float32(0.001), np.float32(0.0)
# Kaldi's subsets of eval2000: score_sclite.sh keeps the lines NOT starting with the other prefix.
SUBSETS = {"swbd": "en_", "callhm": "sw_"}

log = logging.getLogger(__name__)

Alternatives = list[list[tuple[str, float, float]]]


def f32(x: float | str) -> float:
    """A C float: sclite reads stm times (not ctm times) through one, which can move a word
    whose midpoint is at a segment's end into or out of the segment."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


@dataclass(frozen=True)
class Segment:
    """One stm line after filtering: its text is the reference of one scored sentence."""

    file: str
    chan: str
    t1: float
    t2: float
    text: str


@dataclass(frozen=True)
class HypToken:
    """A ctm word, or a GLM alternation of word sequences (each word: text, start, duration)."""

    alternatives: Alternatives

    @property
    def mid(self) -> float:
        """sclite's placement time: the midpoint, for an alternation the latest midpoint."""
        mids = [t + d / 2.0 for alt in self.alternatives for _, t, d in alt]
        return max(mids) if len(self.alternatives) == 1 else max([0.0, *mids])


def percentages(counts: ErrorCounts) -> list[float]:
    """Corr Sub Del Ins Err S.Err, in percent, rounded as sclite's F_ROUND does."""
    c = counts
    return [_round(_pct(x, c.ref_words)) for x in (c.corr, c.sub, c.dels, c.ins, c.errors)] + [
        _round(_pct(c.sentence_errors, c.sentences))]


def _pct(num: int, den: int) -> float:
    return 0.0 if den == 0 else num / den * 100.0


def _round(x: float) -> float:
    """sclite's F_ROUND(x, 1): half away from zero by truncation, through a C float."""
    return f32(int(x * 10.0 + (0.5 if x > 0.0 else -0.5))) / 10.0


def _records(path: str | os.PathLike, option: str, what: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line of an stm or ctm that is neither blank nor a
    ``;;`` comment."""
    try:
        lines = Path(path).read_text(encoding="latin-1").splitlines()
    except OSError as e:
        raise AsrdistError(f"{option} {path}: cannot read the {what} ({e.strerror})") from e
    for n, line in enumerate(lines, 1):
        if line.strip() and not line.lstrip().startswith(";;"):
            yield n, line


NO_WORDS = ("no hypothesis word to score (did decoding fail, or write no word timings: a graph "
            "without phones/align_lexicon.int?)")


def has_words(ctm: str | os.PathLike) -> bool:
    """Whether a CTM holds a word. hubscr.pl scores one without as all deletions, which
    optionally deletable words make a plausible WER: asrdist refuses it (a CTM that only
    scoring's filters empty, every word a hesitation, is scored)."""
    return next(_records(ctm, "CTM", "ctm file"), None) is not None


def read_stm(path: str | os.PathLike, glm: Glm) -> list[Segment]:
    """Segments of an stm (``file chan spkr t1 t2 [<labels>] text``), filtered and sorted."""
    segments = []
    for n, line in _records(path, "--stm", "stm file"):
        fields = line.split()
        try:
            file, chan, _spkr, t1, t2 = fields[0], fields[1], fields[2], float(fields[3]), float(
                fields[4])
        except (IndexError, ValueError):
            raise AsrdistError(
                f"--stm {path}:{n}: expected 'file chan speaker start end [<labels>] text', "
                f"got {line.strip()!r}") from None
        text = fields[5:]
        if text and text[0].startswith("<") and text[0].endswith(">"):
            text = text[1:]
        text = filter_text(" ".join(text), glm, pad=" ")
        segments.append(Segment(file, chan, f32(t1), f32(t2), text))
    if not segments:
        raise AsrdistError(f"--stm {path}: no segments (expected LDC stm lines)")
    return sorted(segments, key=lambda s: (s.file, s.chan, s.t1))


@functools.lru_cache(maxsize=1 << 16)
def _ctm_word_sets(word: str, conf: str | None) -> tuple[tuple[str, ...], ...] | None:
    """The alternatives (word sequences) csrfilt makes of a filtered ctm word and its
    confidence; None when the word stays one token with its own times."""
    parts = re.sub(r"([{}])", r" \1 ", word).split()
    if len(parts) == 1 and conf is None:
        return None
    data = parts + ([] if conf is None else [conf])
    if re.fullmatch(r"[0-9.-]*", data[-1]):
        data = data[:-1]
    sets = " ".join(data).split("/")
    while sets and sets[-1] == "":
        sets.pop()
    return tuple(tuple(chunk.replace("{", "").replace("}", "").split()) for chunk in sets)


def _expand_ctm_word(fields: list[str], word: str) -> list[HypToken]:
    """csrfilt's ctm step: a word the GLM mapped to several words or alternatives is split,
    its duration shared equally and the times printed with three decimals."""
    t1, dur = fields[2], fields[3]
    sets = _ctm_word_sets(word, fields[5] if len(fields) > 5 else None)
    if sets is None:
        return [HypToken([[(word, float(t1), float(dur))]])]
    alternatives: Alternatives = []
    for words in sets:
        share = float(dur) / len(words)
        alternatives.append([(w, float(f"{float(t1) + share * i:.3f}"), float(f"{share:.3f}"))
                             for i, w in enumerate(words)])
    if len(alternatives) == 1:
        return [HypToken([[w]]) for w in alternatives[0]]
    return [HypToken(alternatives)]


def read_ctm(path: str | os.PathLike, glm: Glm) -> dict[tuple[str, str], list[HypToken]]:
    """Hypothesis tokens per (file, channel) of a ctm (``file chan start dur word [conf]``)."""
    rows = []
    for n, line in _records(path, "CTM", "ctm file"):
        fields = line.split()
        try:
            float(fields[2]), float(fields[3]), fields[4]
        except (IndexError, ValueError):
            raise AsrdistError(f"{path}:{n}: expected 'file chan start duration word [conf]', "
                               f"got {line.strip()!r}") from None
        rows.append(fields)
    rows.sort(key=lambda f: (f[0], f[1], float(f[2])))
    tokens: dict[tuple[str, str], list[HypToken]] = {}
    for fields in rows:
        word = filter_text(fields[4], glm)
        if word:
            tokens.setdefault((fields[0], fields[1]), []).extend(_expand_ctm_word(fields, word))
    return tokens


@dataclass
class _Network:
    """Arcs in topological order; arc 0 is the null head that sclite adds before aligning."""

    words: list[str | None] = field(default_factory=lambda: [None])
    preds: list[list[int]] = field(default_factory=lambda: [[]])
    ends: list[int] = field(default_factory=lambda: [0])

    @classmethod
    def build(cls, items: list[str | list[list[str]]]) -> _Network:
        net = cls()
        into: dict[int, list[int]] = {0: [0]}
        node, next_node = 0, 1
        for item in items:
            alternatives = [[item]] if isinstance(item, str) else item
            end = next_node
            next_node += 1
            for alt in alternatives:
                alt = alt or ["@"]
                cur = node
                for k, word in enumerate(alt):
                    to = end if k == len(alt) - 1 else next_node
                    if to != end:
                        next_node += 1
                    net.words.append(word)
                    net.preds.append(list(into.get(cur, [])))
                    into.setdefault(to, []).append(len(net.words) - 1)
                    cur = to
            node = end
        net.ends = into.get(node, [0])
        return net


def text_items(text: str) -> list[str | list[list[str]]]:
    """Words and ``{ A / B C / @ }`` alternations of a filtered reference text."""
    items: list[str | list[list[str]]] = []
    alt: list[list[str]] | None = None
    for tok in re.sub(r"([{}])", r" \1 ", text).split():
        if tok == "{":
            alt = [[]]
        elif tok == "}" and alt is not None:
            items.append(alt)
            alt = None
        elif tok == "/" and alt is not None:
            alt.append([])
        elif alt is not None:
            alt[-1].append(tok)
        else:
            items.append(tok)
    return items


def _opt_del(word: str) -> bool:
    return len(word) > 1 and word[0] == "(" and word[-1] == ")"


def _value(word: str) -> str:
    return word[1:-1] if _opt_del(word) else word


def _is_fragment(word: str) -> bool:
    return word.endswith("-") or word.startswith("-") or (_opt_del(word) and word[-2] == "-")


def words_equal(ref: str, hyp: str) -> bool:
    """sclite's equal_WORD2 with -F: a fragment matches the words it begins or ends."""
    a, b = _value(ref), _value(hyp)
    if _is_fragment(ref) or _is_fragment(hyp):
        for frag, other in ((a, b), (b, a)):
            if len(frag) > 1 and frag[0] == "-":
                return len(other) >= len(frag) - 1 and other.endswith(frag[1:])
            if len(frag) > 1 and frag[-1] == "-":
                return other[:len(frag) - 1] == frag[:-1]
    return a == b


@functools.lru_cache(maxsize=1 << 16)
def _cost(ref: str | None, hyp: str | None) -> np.float32:
    if ref is None and hyp is None:
        raise AsrdistError("internal: cost of two empty words")
    if (hyp is None and ref == "@") or (ref is None and hyp == "@"):
        return NULL_INDEL
    if ref is None or hyp is None:
        word = ref if hyp is None else hyp
        return OPT_DEL if _opt_del(word) else INDEL  # type: ignore[arg-type]
    if ref == "@" and hyp == "@":
        return NULL_SUB
    return ZERO if words_equal(ref, hyp) else SUB


def _least(costs: list, preds: list[int]) -> int:
    """The first of ``preds`` with the least cost (sclite keeps the first strict minimum)."""
    best = preds[0]
    for p in preds[1:]:
        if costs[p] < costs[best]:
            best = p
    return best


def align(ref: _Network, hyp: _Network) -> ErrorCounts:
    """sclite's network DP and back-trace; the counts of one sentence.

    Without an ``@`` arc every cost is a small whole number, which Python floats add exactly
    as sclite's C floats do; with one, the sums are float32, rounded as sclite rounds them.
    """
    rw, hw, rpreds, hpreds = ref.words, hyp.words, ref.preds, hyp.preds
    na, nb = len(rw), len(hw)
    num = np.float32 if "@" in rw or "@" in hw else float
    zero = num(0.0)
    dcost = [zero] + [num(_cost(w, None)) for w in rw[1:]]
    icost = [zero] + [num(_cost(None, w)) for w in hw[1:]]
    cost = [[zero] * nb for _ in range(na)]
    back = [[(-1, -1)] * nb for _ in range(na)]
    top = cost[0]
    for b in range(1, nb):
        p = _least(top, hpreds[b])
        top[b], back[0][b] = top[p] + icost[b], (0, p)
    column = [row[0] for row in cost]
    for a in range(1, na):
        p = _least(column, rpreds[a])
        column[a] = cost[a][0] = column[p] + dcost[a]
        back[a][0] = (p, 0)
    hplain = [_plain(w) for w in hw]
    sub_cost = num(SUB)
    for a in range(1, na):
        wa, dc, rp, row, brow = rw[a], dcost[a], rpreds[a], cost[a], back[a]
        plain_a, one_pred, up = _plain(wa), len(rp) == 1, cost[rp[0]]
        for b in range(1, nb):
            wb, hp = hw[b], hpreds[b]
            if one_pred and len(hp) == 1:  # a plain sequence: one way into the cell
                sa = pd = rp[0]
                sb = pi = hp[0]
                s0, d0, i0 = up[sb], up[b], row[pi]
            else:
                pi = _least(row, hp)
                pd = rp[0]
                for p in rp[1:]:
                    if cost[p][b] < cost[pd][b]:
                        pd = p
                sa, sb = rp[0], hp[0]
                for pa in rp:
                    prow = cost[pa]
                    for pb in hp:
                        if prow[pb] < cost[sa][sb]:
                            sa, sb = pa, pb
                s0, d0, i0 = cost[sa][sb], cost[pd][b], row[pi]
            if wa == wb and wa != "@":
                sc = zero
            elif plain_a and hplain[b]:
                sc = sub_cost
            else:
                sc = num(_cost(wa, wb))
            s, d, i = s0 + sc, d0 + dc, i0 + icost[b]
            if s <= d and s <= i:
                row[b], brow[b] = s, (sa, sb)
            elif d < i:
                row[b], brow[b] = d, (pd, b)
            else:
                row[b], brow[b] = i, (a, pi)
    a, b = ref.ends[0], hyp.ends[0]
    for pa in ref.ends:
        for pb in hyp.ends:
            if cost[pa][pb] < cost[a][b]:
                a, b = pa, pb
    corr = sub = dels = ins = 0
    while a > 0 or b > 0:
        pa, pb = back[a][b]
        wa, wb = rw[a], hw[b]
        if pa == a:  # insertion
            if wb != "@":
                if _opt_del(wb):  # type: ignore[arg-type]
                    corr += 1
                else:
                    ins += 1
        elif pb == b:  # deletion
            if wa != "@":
                if _opt_del(wa):  # type: ignore[arg-type]
                    corr += 1
                else:
                    dels += 1
        elif not (wa == "@" and wb == "@"):
            if wa == wb or words_equal(wa, wb):  # type: ignore[arg-type]
                corr += 1
            else:
                sub += 1
        a, b = pa, pb
    # sclite's word count: an optionally deletable word counts as a correct reference word
    return ErrorCounts(ref_words=corr + sub + dels, corr=corr, sub=sub, dels=dels, ins=ins,
                       sentences=1, sentence_errors=int(sub + dels + ins > 0))


@functools.lru_cache(maxsize=1 << 16)
def _plain(word: str | None) -> bool:
    """A word that equals only itself: not ``@``, not optionally deletable, not a fragment."""
    return word is not None and word != "@" and not _opt_del(word) and not _is_fragment(word)


def _hyp_network(tokens: list[HypToken]) -> _Network:
    items: list[str | list[list[str]]] = []
    for tok in tokens:
        if len(tok.alternatives) == 1:
            items.extend(w for w, _, _ in tok.alternatives[0])
        else:
            items.append([[w for w, _, _ in alt] for alt in tok.alternatives])
    return _Network.build(items)


def _hyp_key(tokens: list[HypToken]) -> tuple:
    """What of a channel's tokens the alignment sees: their words, not their times."""
    return tuple(tuple(tuple(w for w, _, _ in alt) for alt in tok.alternatives)
                 for tok in tokens)


class Reference:
    """An stm filtered once with its GLM, and the GLM's ctm rules compiled once, for scoring
    any number of CTMs (a sweep's points) and subsets against it.

    Alignments are kept by (reference text, hypothesis words): a segment whose hypothesis is
    the same at another sweep point, or in a subset, is not aligned again.
    """

    def __init__(self, stm: str | os.PathLike, glm: str | os.PathLike):
        self.segments = read_stm(stm, read_glm(glm, "stm", "ref"))
        self.ctm_glm = read_glm(glm, "ctm", "hyp")
        self.channels: dict[tuple[str, str], list[Segment]] = {}
        for seg in self.segments:
            self.channels.setdefault((seg.file, seg.chan), []).append(seg)
        self.files = {seg.file for seg in self.segments}
        self._refs = {seg.text: _Network.build(text_items(seg.text)) for seg in self.segments}
        self._aligned: dict[tuple[str, tuple], ErrorCounts] = {}

    def read_ctm(self, ctm: str | os.PathLike) -> dict[tuple[str, str], list[HypToken]]:
        """The ctm's tokens per channel, filtered with the GLM's ctm rules."""
        tokens = read_ctm(ctm, self.ctm_glm)
        extra = sorted(set(tokens) - set(self.channels))
        if extra:
            raise AsrdistError(f"CTM: file {extra[0][0]} channel {extra[0][1]} is not in the stm")
        return tokens

    def score_channel(self, key: tuple[str, str], tokens: list[HypToken]) -> ErrorCounts:
        """Share one channel's hypothesis tokens among its segments and align each."""
        segments = self.channels[key]
        total, cur = ErrorCounts(), 0
        for k, seg in enumerate(segments):
            end = len(tokens) if k == len(segments) - 1 else cur
            while k < len(segments) - 1 and end < len(tokens) and tokens[end].mid < seg.t2:
                end += 1
            mine, cur = tokens[cur:end], end
            if any(tag in seg.text for tag in IGNORE):
                continue
            memo = (seg.text, _hyp_key(mine))
            if memo not in self._aligned:
                self._aligned[memo] = align(self._refs[seg.text], _hyp_network(mine))
            total += self._aligned[memo]
        return total

    def score(self, tokens: dict[tuple[str, str], list[HypToken]]) -> dict[str, ErrorCounts]:
        """Sum/Avg counts of the whole set (``""``) and, when the stm holds both, of Kaldi's
        eval2000 subsets (``".swbd"``, ``".callhm"``); each channel is aligned once."""
        per_channel = {key: self.score_channel(key, tokens.get(key, []))
                       for key in sorted(self.channels)}
        runs = {"": sum(per_channel.values(), ErrorCounts())}
        for name, drop in SUBSETS.items():
            if any(f.startswith(drop) for f in self.files) and any(
                    not f.startswith(drop) for f in self.files):
                runs[f".{name}"] = sum((c for (file, _), c in per_channel.items()
                                        if not file.startswith(drop)), ErrorCounts())
        return runs

    def score_file(self, ctm: str | os.PathLike) -> list[str]:
        """Score CTM as hubscr.pl does; writes ``CTM.filt.sys`` (and ``CTM.swbd.filt.sys``,
        ``CTM.callhm.filt.sys`` when the stm holds both subsets) with the Sum/Avg row and
        returns Kaldi's lines for them."""
        lines = []
        for suffix, counts in self.score(self.read_ctm(ctm)).items():
            path = f"{ctm}{suffix}.filt.sys"
            with atomic_write(path) as f:
                f.write(sys_line(counts) + "\n")
            lines.append(kaldi_line(counts, path))
        return lines


def sys_line(counts: ErrorCounts) -> str:
    """The ``Sum/Avg`` row of sclite's .sys report."""
    pcts = " ".join(f"{p:.1f}" for p in percentages(counts))
    return f"| Sum/Avg | {counts.sentences} {counts.ref_words} | {pcts} |"


def kaldi_line(counts: ErrorCounts, path: str) -> str:
    """What ``grep Sum *.sys | utils/best_wer.sh`` prints for a .sys file."""
    pcts = [f"{p:.1f}" for p in percentages(counts)]
    return f"%WER {pcts[4]} | {counts.sentences} {counts.ref_words} | {' '.join(pcts)} | {path}"


def score_stm_glm_ctm(stm: str | os.PathLike, glm: str | os.PathLike,
                      ctm: str | os.PathLike) -> list[str]:
    """Score CTM as hubscr.pl does, for the whole set and Kaldi's eval2000 subsets
    (:meth:`Reference.score_file`); an empty CTM is an error (:func:`has_words`)."""
    if not has_words(ctm):
        raise AsrdistError(f"{ctm}: empty CTM, {NO_WORDS}")
    return Reference(stm, glm).score_file(ctm)


def _wer(line: str) -> float:
    return float(line.split()[1])


def score_decode_dir(stm: str | os.PathLike, glm: str | os.PathLike,
                     decode_dir: str | os.PathLike, data_dir: str | os.PathLike,
                     name: str = "eval2000", recipe: str = S5C,
                     acronyms: AcronymMap | None = None) -> list[str]:
    """score_sclite.sh over a decode dir: every CTM (``ctm`` and each sweep point's
    ``score_*/ctm``) made recording-relative, filtered and its acronyms split as the Kaldi
    ``recipe``'s script does (:mod:`asrdist.score.ctm`; s5c's with the map ``acronyms``) into
    ``NAME.ctm`` beside it, then scored as hubscr.pl does. Returns every line, then per
    subset the best one (lowest %WER, as ``grep Sum */*.sys | utils/best_wer.sh`` picks),
    prefixed ``best: ``. A decode dir whose CTMs are all empty is an error (:func:`has_words`);
    a sweep point's empty CTM is scored (its hypotheses may all be empty), with a warning."""
    decode_dir = Path(decode_dir)
    dirs = [d for d in [decode_dir, *sorted(decode_dir.glob("score_*"))] if (d / "ctm").is_file()]
    if not dirs:
        raise AsrdistError(f"{decode_dir}: no ctm (nor score_*/ctm) in the decode dir")
    empty = [d / "ctm" for d in dirs if not has_words(d / "ctm")]
    if len(empty) == len(dirs):
        raise AsrdistError(f"{decode_dir}: every CTM of the decode dir is empty, {NO_WORDS}")
    for ctm in empty:
        log.warning("%s: empty CTM: scored as all deletions", ctm)
    reference = Reference(stm, glm)
    lines, best = [], {}
    for d in dirs:
        ctm = write_recording_ctm(d / "ctm", data_dir, d / f"{name}.ctm", recipe,
                                  acronyms)
        for line in reference.score_file(ctm):
            lines.append(line)
            subset = line.rsplit("|", 1)[1].strip().rsplit(".filt.sys", 1)[0].rsplit(".", 1)[-1]
            if subset not in best or _wer(line) < _wer(best[subset]):
                best[subset] = line
    return lines + [f"best: {line}" for line in best.values()]
