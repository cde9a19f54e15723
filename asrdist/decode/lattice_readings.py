"""A decode dir's texts and CTMs read off the lattices it holds (``lat.*.gz``), as
asrdist-decode writes them for the lattices it searched: ``text`` and ``ctm`` at LMWT 1/acwt,
``score_LMWT_WIP/{text,ctm}`` per sweep point (lattice-scale | lattice-add-penalty |
lattice-best-path; word times as lattice-1best | lattice-align-words-lexicon | nbest-to-ctm),
and the words.txt they are spelled with; for lattices made elsewhere (asrdist-lmrescore's), so
that the dir is scored like any decode dir.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from asrdist.decode.lattice import BestPath, CompactLattice, best_paths
from asrdist.decode.lattice.native import FlatLattice
from asrdist.decode.word_align import WordAligner
from asrdist.errors import AsrdistError
from asrdist.fsutil import write_atomically
from asrdist.kaldi.data_dir import read_symbols
from asrdist.kaldi.transition_model import TransitionInfo, read_transition_model

log = logging.getLogger(__name__)


def frame_shift(data_dir: str | os.PathLike) -> float:
    """Seconds per frame: the data dir's ``frame_shift`` file, else Kaldi's 10 ms."""
    shift_file = Path(data_dir) / "frame_shift"
    return float(shift_file.read_text().split()[0]) if shift_file.is_file() else 0.01


def word_aligner(trans: TransitionInfo, lexicon: Path | None) -> WordAligner | None:
    """lattice-align-words-lexicon's aligner from the lang's phones/align_lexicon.int; None
    without one (no CTMs then)."""
    if lexicon is None or not lexicon.is_file():
        return None
    rows = [[int(x) for x in line.split()] for line in lexicon.read_text().splitlines()]
    return WordAligner(trans, rows)


class PathReader:
    """Words and (with an aligner) CTM lines of a best path, as int2sym.pl and nbest-to-ctm
    print them. ``holder``: what holds an id words.txt lacks, for the error (``{utt}``)."""

    def __init__(self, words_txt: Path, aligner: WordAligner | None, shift: float,
                 holder: str = "the lattice of utterance {utt} holds") -> None:
        self.words_txt, self.aligner, self.holder = words_txt, aligner, holder
        self.id2word = {i: w for w, i in read_symbols(words_txt).items()}
        self.shift = np.float32(shift)  # nbest-to-ctm's: a float, compared in double
        self.digits = 2 + (float(self.shift) < 0.01) + (float(self.shift) < 0.001)

    def words(self, utt: str, ids: Sequence[int]) -> list[str]:
        try:
            return [self.id2word[w] for w in ids]
        except KeyError as e:
            raise AsrdistError(f"{self.words_txt}: no word has id {e.args[0]}, which "
                               f"{self.holder.format(utt=utt)}") from None

    def read_points(self, utt: str, clat: CompactLattice | FlatLattice,
                    points: Sequence[tuple[float, float]]
                    ) -> dict[tuple[float, float], tuple[list[str], list[str] | None]]:
        """Words and CTM lines of the best path at each (lmwt, wip) point, all found in one
        call (:func:`best_paths`), each distinct path read once: most of the sweep's points
        share a path, and its word alignment cost more than the search for it."""
        read: dict[tuple[tuple[int, ...], tuple[int, ...]],
                   tuple[list[str], list[str] | None]] = {}
        out = {}
        unique = list(dict.fromkeys(points))
        for point, path in zip(unique, best_paths(clat, unique), strict=True):
            key = (tuple(path.words), tuple(path.alignment))
            if key not in read:
                read[key] = (self.words(utt, path.words), self.ctm(utt, path))
            out[point] = read[key]
        return out

    def ctm(self, utt: str, path: BestPath) -> list[str] | None:
        """CTM lines (times relative to the utterance); None without word timings."""
        timed = self.aligner.align(path.alignment, path.words) if self.aligner else None
        if timed is None:
            return None
        words = self.words(utt, [w for w, _, _ in timed])
        s, d = self.shift, self.digits
        return [f"{utt} 1 {float(s * a):.{d}f} {float(s * n):.{d}f} {word}"
                for word, (_, a, n) in zip(words, timed, strict=True)]


def write_readings(out_dir: str | os.PathLike, lattices: Iterable[tuple[str, CompactLattice]],
                   data_dir: str | os.PathLike, words_txt: str | os.PathLike,
                   trans_mdl: str | os.PathLike | None, lexicon: str | os.PathLike | None,
                   lmwts: Sequence[float], wips: Sequence[float], acwt: float = 0.1) -> None:
    """OUT's text, ctm and score_LMWT_WIP/{text,ctm} from ``lattices`` ((utterance, lattice)
    pairs, read one at a time: every point is read off a lattice before the next, so only the
    texts and CTM lines are held), and a copy of ``words_txt``; every file written atomically.
    Without ``trans_mdl`` or ``lexicon`` (the lang's phones/align_lexicon.int) the CTMs are left
    out, with a warning. An utterance twice is an error."""
    out = Path(out_dir)
    aligner = (word_aligner(read_transition_model(trans_mdl), Path(lexicon))
               if trans_mdl and lexicon else None)
    reader = PathReader(Path(words_txt), aligner, frame_shift(data_dir))
    if reader.aligner is None:
        log.warning("%s: no transition model or align_lexicon.int: texts only, no CTMs", out)
    points = [("", 1.0 / acwt, 0.0)] + [(f"score_{lmwt:g}_{wip:.1f}/", lmwt, wip)
                                        for lmwt in lmwts for wip in wips]
    texts: dict[str, dict[str, str]] = {prefix: {} for prefix, _, _ in points}
    ctms: dict[str, list[str]] = {prefix: [] for prefix, _, _ in points}
    for utt, clat in lattices:
        if utt in texts[""]:
            raise AsrdistError(f"{out}: utterance {utt} has two lattices")
        read = reader.read_points(utt, clat, [(lmwt, wip) for _, lmwt, wip in points])
        for prefix, lmwt, wip in points:
            words, lines = read[lmwt, wip]
            texts[prefix][utt] = f"{utt} {' '.join(words)}".rstrip()
            ctms[prefix] += lines or []
    for prefix, _, _ in points:
        lines = [texts[prefix][u] for u in sorted(texts[prefix], key=str.encode)]
        _write(out / f"{prefix}text", "".join(t + "\n" for t in lines), "hypotheses")
        if reader.aligner is not None:
            ctm = sorted(ctms[prefix],
                         key=lambda line: (line.split()[0].encode(), float(line.split()[2])))
            _write(out / f"{prefix}ctm", "".join(c + "\n" for c in ctm), "CTM")
    _write(out / "words.txt", Path(words_txt).read_text(encoding="utf-8"), "words.txt")


def _write(path: Path, text: str, what: str) -> None:
    raw = text.encode("utf-8")
    write_atomically(path, lambda f: f.write(raw), what)
