"""Scoring hypotheses against references the way Kaldi reports it and sclite counts it.

A reference utterance with no hypothesis is scored as all deletions (and counted, so it is
visible), never silently dropped as sclite would; a hypothesis for an utterance that is not in
the reference is an error, as is a hypothesis word outside the graph's words.txt (a sign that
the hypotheses and the graph do not belong together).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.data_dir import read_symbols, read_table
from asrdist.score.align_text import ErrorCounts, count_errors

log = logging.getLogger(__name__)

Texts = dict[str, list[str]]


@dataclass
class ScoreResult:
    """Totals, per-subset counts and the utterances that had no hypothesis."""

    total: ErrorCounts
    subsets: dict[str, ErrorCounts] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def read_text(path: str | os.PathLike) -> Texts:
    """Read a Kaldi ``text`` file (``utt word word ...``); an utterance may have no words."""
    return {utt: words.split() for utt, words in read_table(path).items()}


def read_vocabulary(words_txt: str | os.PathLike) -> set[str]:
    """Words of a Kaldi ``words.txt`` symbol table."""
    return set(read_symbols(words_txt))


def check_vocabulary(hyps: Texts, vocab: set[str], source: str) -> None:
    """Refuse a hypothesis word that the decoding graph cannot produce."""
    for utt, words in hyps.items():
        for word in words:
            if word not in vocab:
                raise AsrdistError(
                    f"{source}: utterance {utt}: hypothesis word {word!r} is not in words.txt"
                )


def score_texts(
    refs: Mapping[str, list[str]],
    hyps: Mapping[str, list[str]],
    subset_of: Mapping[str, tuple[str, ...]] | None = None,
    hyp_source: str = "hypothesis",
) -> ScoreResult:
    """Align every reference utterance with its hypothesis (empty when missing) and sum; an
    utterance counts in each of its subsets (one per map of ``--subsets-by``: its voice's, its
    synthesizer's)."""
    if not refs:
        raise AsrdistError("empty test set: the reference has no utterances")
    extra = [utt for utt in hyps if utt not in refs]
    if extra:
        raise AsrdistError(
            f"{hyp_source}: {len(extra)} utterance(s) not in the reference, e.g. {extra[0]}"
        )
    total = ErrorCounts()
    subsets: dict[str, ErrorCounts] = {}
    missing = []
    for utt in sorted(refs):
        if utt not in hyps:
            missing.append(utt)
        counts = count_errors(refs[utt], hyps.get(utt, []))
        total = total + counts
        if subset_of is not None:
            if utt not in subset_of:
                raise AsrdistError(f"utterance {utt} has no subset in the subset map")
            for name in subset_of[utt]:
                subsets[name] = subsets.get(name, ErrorCounts()) + counts
    if missing:
        log.warning(
            "%s: %d of %d reference utterances have no hypothesis (scored as deletions), e.g. %s",
            hyp_source, len(missing), len(refs), missing[0],
        )
    return ScoreResult(total, dict(sorted(subsets.items())), missing)


def wer_line(counts: ErrorCounts, label: str = "") -> str:
    """Kaldi compute-wer's line: ``%WER 12.34 [ 1234 / 10000, 100 ins, 200 del, 934 sub ]``."""
    line = (
        f"%WER {counts.wer:.2f} [ {counts.errors} / {counts.ref_words}, "
        f"{counts.ins} ins, {counts.dels} del, {counts.sub} sub ]"
    )
    return f"{line} {label}" if label else line


def kaldi_wer_report(result: ScoreResult, label: str = "") -> str:
    """The three lines compute-wer prints: %WER, %SER and the count of missing hypotheses."""
    t = result.total
    ser = 100.0 * t.sentence_errors / t.sentences if t.sentences else 0.0
    return (
        f"{wer_line(t, label)}\n"
        f"%SER {ser:.2f} [ {t.sentence_errors} / {t.sentences} ]\n"
        f"Scored {t.sentences} sentences, {len(result.missing)} not present in hyp.\n"
    )


def trn_speaker(utt: str, utt2spk: Mapping[str, str] | None) -> str:
    """Speaker field of a trn id; '-' would end it early under sclite's ``-i rm``."""
    spk = utt2spk.get(utt, utt) if utt2spk else utt
    return spk.replace("-", "_")


def write_trn(
    path: str | os.PathLike,
    texts: Mapping[str, list[str]],
    utts: Iterable[str],
    utt2spk: Mapping[str, str] | None = None,
) -> None:
    """Write sclite ``trn`` lines ``word word (spk-utt)`` for ``utts`` (absent ones empty)."""
    with atomic_write(path) as f:
        for utt in utts:
            words = " ".join(texts.get(utt, []))
            ident = f"({trn_speaker(utt, utt2spk)}-{utt})"
            f.write(f"{words} {ident}\n" if words else f"{ident}\n")


def subset_map(
    spec: str | None, ref_text: str | os.PathLike, utts: Iterable[str]
) -> tuple[dict[str, tuple[str, ...]] | None, dict[str, str] | None]:
    """Resolve ``--subsets-by``: ``spk`` (utt2spk beside the reference) or a file ``utt subset``,
    or several of them joined by commas (``spk,data/test/utt2synth``: every utterance in its
    speaker's subset and in its synthesizer's).

    Every utterance of ``utts`` (the reference's) must be in every map: one left out of a map
    would silently drop out of that map's subsets. Returns (subset_of: utterance -> one subset
    per map, utt2spk); utt2spk is read whenever it sits beside the reference, for the speaker
    field of the trn files.
    """
    utt2spk_path = Path(ref_text).parent / "utt2spk"
    utt2spk = read_table(utt2spk_path, require_value=True) if utt2spk_path.is_file() else None
    if spec is None:
        return None, utt2spk
    maps = []
    for part in spec.split(","):
        if part == "spk":
            if utt2spk is None:
                raise AsrdistError(f"--subsets-by spk: {utt2spk_path} does not exist")
            maps.append((utt2spk_path, utt2spk))
        else:
            maps.append((Path(part), read_table(part, require_value=True)))
    utts = list(utts)
    for path, table in maps:
        missing = [u for u in utts if u not in table]
        if missing:
            raise AsrdistError(f"--subsets-by: {path} has no subset for {len(missing)} "
                               f"reference utterance(s), e.g. {missing[0]}")
    return {u: tuple(table[u] for _, table in maps) for u in utts}, utt2spk


def find_variants(decode_dir: str | os.PathLike) -> dict[str, Path]:
    """Map variant name -> hypothesis text for every ``score_<name>/text`` in a decode dir."""
    decode_dir = Path(decode_dir)
    out = {}
    for sub in sorted(decode_dir.glob("score_*")):
        if (sub / "text").is_file():
            out[sub.name[len("score_"):]] = sub / "text"
    return out


def best_variant(wers: Mapping[str, ErrorCounts]) -> str:
    """The variant utils/best_wer.sh would pick: lowest printed %WER, first in C-locale order."""
    if not wers:
        raise AsrdistError("no variants to choose from")
    best = None
    for name in sorted(wers, key=lambda n: f"wer_{n}".encode()):
        value = round(wers[name].wer, 2)
        if best is None or value < best[1]:
            best = (name, value)
    return best[0]


@dataclass
class Scored:
    """One scored hypothesis set: where it came from and its result."""

    name: str
    hyp_text: Path
    result: ScoreResult


@dataclass
class ScoringRun:
    """Everything one ``asrdist-score`` call scored: the main text and any sweep variants."""

    ref_text: Path
    out_dir: Path
    main: Scored | None
    variants: list[Scored]
    best: Scored | None

    @property
    def primary(self) -> Scored:
        """The main hypotheses if there are any, else the best sweep variant."""
        return self.main if self.main is not None else self.best  # type: ignore[return-value]


def score_hypotheses(
    ref_text: str | os.PathLike,
    hyp: str | os.PathLike,
    out_dir: str | os.PathLike | None = None,
    subsets_by: str | None = None,
    words_txt: str | os.PathLike | None = None,
) -> ScoringRun:
    """Score a hypothesis text, or a decode dir (``text`` and ``score_*/text`` variants).

    Writes into ``out_dir`` (default: the decode dir, or the text's folder): ``wer`` and
    ``wer_<variant>`` (compute-wer's lines), ``best_wer`` (as utils/best_wer.sh prints it),
    ``ref.trn``/``hyp.trn`` for sclite (of the main text, else the best variant).
    A decode dir's own ``words.txt`` is used for the vocabulary check unless one is given.
    """
    ref_text, hyp = Path(ref_text), Path(hyp)
    refs = read_text(ref_text)
    subset_of, utt2spk = subset_map(subsets_by, ref_text, refs)
    if hyp.is_dir():
        main_text = hyp / "text" if (hyp / "text").is_file() else None
        variants = find_variants(hyp)
        if main_text is None and not variants:
            raise AsrdistError(f"{hyp}: decode dir has neither text nor score_*/text")
        default_out = hyp
        if words_txt is None and (hyp / "words.txt").is_file():
            words_txt = hyp / "words.txt"
    elif hyp.is_file():
        main_text, variants, default_out = hyp, {}, hyp.parent
    else:
        raise AsrdistError(f"{hyp}: no such hypothesis file or decode dir")
    out = Path(out_dir) if out_dir is not None else default_out
    vocab = read_vocabulary(words_txt) if words_txt is not None else None

    def run(name: str, path: Path) -> tuple[Scored, Texts]:
        hyps = read_text(path)
        if vocab is not None:
            check_vocabulary(hyps, vocab, str(path))
        return Scored(name, path, score_texts(refs, hyps, subset_of, str(path))), hyps

    main = main_hyps = None
    if main_text is not None:
        main, main_hyps = run("main", main_text)
        with atomic_write(out / "wer") as f:
            f.write(kaldi_wer_report(main.result))
    scored_variants, variant_hyps = [], {}
    for name, path in variants.items():
        scored, variant_hyps[name] = run(name, path)
        scored_variants.append(scored)
        with atomic_write(out / f"wer_{name}") as f:
            f.write(kaldi_wer_report(scored.result))
    best = None
    if scored_variants:
        best_name = best_variant({s.name: s.result.total for s in scored_variants})
        best = next(s for s in scored_variants if s.name == best_name)
        with atomic_write(out / "best_wer") as f:
            f.write(wer_line(best.result.total, str(out / f"wer_{best.name}")) + "\n")
    trn_hyps = main_hyps if main_hyps is not None else variant_hyps[best.name]  # type: ignore[union-attr]
    utts = sorted(refs)
    write_trn(out / "ref.trn", refs, utts, utt2spk)
    write_trn(out / "hyp.trn", trn_hyps, utts, utt2spk)
    return ScoringRun(ref_text, out, main, scored_variants, best)
