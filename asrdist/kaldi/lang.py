"""Kaldi lang dir: made from a dict dir as utils/prepare_lang.sh --position-dependent-phones
false, and read back (:class:`Lang`) for alignment and graph building.

Writes phones.txt, words.txt, oov.{txt,int}, phones/*, topo, L.fst and L_disambig.fst so that
Kaldi tools and the rest of asrdist (graph compilation, alignment, HCLG) read it unchanged.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import kaldifst

from asrdist.errors import AsrdistError
from asrdist.fsutil import mark_done, staged_dir
from asrdist.kaldi.data_dir import read_symbols
from asrdist.kaldi.topology import make_topo

RESERVED_WORDS = ("<eps>", "#0", "<s>", "</s>")


@dataclass
class LexEntry:
    """One lexicon line: a word and its phones (line number kept for error messages)."""

    word: str
    phones: list[str]
    line: int


@dataclass
class DictDir:
    """The content of a Kaldi dict dir."""

    silence_lines: list[list[str]]
    nonsilence_lines: list[list[str]]
    optional_silence: str
    lexicon: list[LexEntry]

    @property
    def silence(self) -> list[str]:
        return [p for line in self.silence_lines for p in line]

    @property
    def nonsilence(self) -> list[str]:
        return [p for line in self.nonsilence_lines for p in line]


def _read_lines(path: Path) -> list[list[str]]:
    if not path.is_file():
        raise AsrdistError(f"{path}: missing dict file")
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines()]


def _phone_lines(path: Path) -> list[list[str]]:
    lines = _read_lines(path)
    for i, fields in enumerate(lines, 1):
        if not fields:
            raise AsrdistError(f"{path}:{i}: empty line")
    return lines


def read_dict_dir(dict_dir: Path) -> DictDir:
    """Read and validate a dict dir; errors name the file and line."""
    dict_dir = Path(dict_dir)
    sil = _phone_lines(dict_dir / "silence_phones.txt")
    nonsil = _phone_lines(dict_dir / "nonsilence_phones.txt")
    opt_path = dict_dir / "optional_silence.txt"
    opt = [p for line in _read_lines(opt_path) for p in line]
    seen: set[str] = set()
    for path, lines in ((dict_dir / "silence_phones.txt", sil),
                        (dict_dir / "nonsilence_phones.txt", nonsil)):
        for i, fields in enumerate(lines, 1):
            for p in fields:
                if p in seen or p.startswith("#") or p == "<eps>":
                    raise AsrdistError(f"{path}:{i}: phone {p!r} repeated or reserved")
                seen.add(p)
    if len(opt) != 1 or opt[0] not in {p for line in sil for p in line}:
        raise AsrdistError(f"{opt_path}:1: expected one phone from silence_phones.txt")
    lex_path = dict_dir / "lexicon.txt"
    lexicon = []
    seen_lines: set[tuple[str, ...]] = set()
    for i, fields in enumerate(_read_lines(lex_path), 1):
        if not fields:
            raise AsrdistError(f"{lex_path}:{i}: empty line")
        word, phones = fields[0], fields[1:]
        if word in RESERVED_WORDS:
            raise AsrdistError(f"{lex_path}:{i}: reserved word {word!r}")
        if not phones:
            raise AsrdistError(f"{lex_path}:{i}: word {word!r} has no phones")
        for p in phones:
            if p not in seen:
                raise AsrdistError(f"{lex_path}:{i}: phone {p!r} of word {word!r} is not in "
                                   "silence_phones.txt or nonsilence_phones.txt")
        if tuple(fields) in seen_lines:
            raise AsrdistError(f"{lex_path}:{i}: duplicated entry for word {word!r}")
        seen_lines.add(tuple(fields))
        lexicon.append(LexEntry(word, phones, i))
    if not lexicon:
        raise AsrdistError(f"{lex_path}: empty lexicon")
    return DictDir(sil, nonsil, opt[0], lexicon)


def add_lex_disambig(lexicon: list[LexEntry]) -> tuple[list[list[str]], int]:
    """Append #1, #2, ... to prons that are homophones or prefixes of other prons.

    As utils/add_lex_disambig.pl: the k-th word sharing a pron gets #k; a unique pron that is
    a proper prefix of another gets #1. Returns the new prons and the largest symbol used.
    """
    count = Counter(tuple(e.phones) for e in lexicon)
    prefixes = {tuple(e.phones[:k]) for e in lexicon for k in range(len(e.phones))}
    used: dict[tuple[str, ...], int] = {}
    out, max_disambig = [], 0
    for e in lexicon:
        pron = tuple(e.phones)
        if count[pron] == 1 and pron not in prefixes:
            out.append(list(pron))
            continue
        used[pron] = used.get(pron, 0) + 1
        max_disambig = max(max_disambig, used[pron])
        out.append([*pron, f"#{used[pron]}"])
    return out, max_disambig


def lexicon_fst_text(
    entries: list[tuple[int, list[int]]],
    sil_prob: float,
    sil_phone: int,
    sil_disambig: int | None = None,
) -> str:
    """Text FST (ints) of utils/make_lexicon_fst.pl: phones in, words out, optional silence.

    ``entries`` are (word id, phone ids). With ``sil_prob`` > 0 every word may be followed by
    silence with probability sil_prob (and the utterance may start with it); a word whose pron
    ends in the silence phone gets no extra silence.
    """
    lines: list[str] = []
    if sil_prob == 0.0:
        loop, nxt = 0, 1
        for word, phones in entries:
            s, out = loop, word
            for i, p in enumerate(phones):
                ns = loop if i == len(phones) - 1 else nxt
                if ns == nxt:
                    nxt += 1
                lines.append(f"{s}\t{ns}\t{p}\t{out}")
                out, s = 0, ns
        lines.append(f"{loop}\t0")
        return "\n".join(lines) + "\n"
    if not 0.0 < sil_prob < 1.0:
        raise AsrdistError(f"sil_prob {sil_prob}: must be in [0, 1)")
    sil_cost, nosil_cost = -math.log(sil_prob), -math.log(1.0 - sil_prob)
    start, loop, silstate = 0, 1, 2
    lines.append(f"{start}\t{loop}\t0\t0\t{nosil_cost}")
    if sil_disambig is None:
        lines.append(f"{start}\t{loop}\t{sil_phone}\t0\t{sil_cost}")
        lines.append(f"{silstate}\t{loop}\t{sil_phone}\t0")
        nxt = 3
    else:
        disambig_state, nxt = 3, 4
        lines.append(f"{start}\t{disambig_state}\t{sil_phone}\t0\t{sil_cost}")
        lines.append(f"{silstate}\t{disambig_state}\t{sil_phone}\t0")
        lines.append(f"{disambig_state}\t{loop}\t{sil_disambig}\t0")
    for word, phones in entries:
        s, out = loop, word
        for i, p in enumerate(phones):
            if i < len(phones) - 1:
                lines.append(f"{s}\t{nxt}\t{p}\t{out}")
                out, s, nxt = 0, nxt, nxt + 1
            elif p != sil_phone:
                lines.append(f"{s}\t{loop}\t{p}\t{out}\t{nosil_cost}")
                lines.append(f"{s}\t{silstate}\t{p}\t{out}\t{sil_cost}")
            else:
                lines.append(f"{s}\t{loop}\t{p}\t{out}")
    lines.append(f"{loop}\t0")
    return "\n".join(lines) + "\n"


def add_disambig_self_loops(fst: kaldifst.StdVectorFst, ilabel: int, olabel: int) -> None:
    """fstaddselfloops: a (ilabel:olabel) loop on final states and states emitting words.

    Lets the grammar's #0 pass through L_disambig.fst when composing with G.
    """
    zero = kaldifst.TropicalWeight.zero
    states = [
        s for s in range(fst.num_states)
        if fst.final(s) != zero or any(a.olabel != 0 for a in kaldifst.ArcIterator(fst, s))
    ]
    for s in states:
        fst.add_arc(s, kaldifst.StdArc(ilabel, olabel, 0.0, s))


def _write_fst(fst: kaldifst.StdVectorFst, path: Path) -> None:
    kaldifst.arcsort(fst, sort_type="olabel")
    if not fst.write(str(path)):
        raise AsrdistError(f"{path}: cannot write FST")


def _write_table(path: Path, rows: list[str]) -> None:
    path.write_text("".join(f"{r}\n" for r in rows), encoding="utf-8")


def _write_phone_sets(
    phones_dir: Path, d: DictDir, disambig: list[str], phone_id: dict[str, int],
    word_id: dict[str, int],
) -> None:
    """phones/*.{txt,int,csl}: the phone sets Kaldi scripts read by name."""
    sets = {
        "silence": d.silence,
        "nonsilence": d.nonsilence,
        "optional_silence": [d.optional_silence],
        "disambig": disambig,
        "context_indep": d.silence,
    }
    for name, members in sets.items():
        ids = [str(phone_id[p]) for p in members]
        _write_table(phones_dir / f"{name}.txt", members)
        _write_table(phones_dir / f"{name}.int", ids)
        _write_table(phones_dir / f"{name}.csl", [":".join(ids)])
    _write_table(phones_dir / "wdisambig.txt", ["#0"])
    _write_table(phones_dir / "wdisambig_phones.int", [str(phone_id["#0"])])
    _write_table(phones_dir / "wdisambig_words.int", [str(word_id["#0"])])
    set_lines = d.silence_lines + d.nonsilence_lines
    set_ints = [" ".join(str(phone_id[p]) for p in s) for s in set_lines]
    _write_table(phones_dir / "sets.txt", [" ".join(s) for s in set_lines])
    _write_table(phones_dir / "sets.int", set_ints)
    _write_table(phones_dir / "roots.txt", [f"shared split {' '.join(s)}" for s in set_lines])
    _write_table(phones_dir / "roots.int", [f"shared split {s}" for s in set_ints])
    _write_table(phones_dir / "extra_questions.txt", [])
    _write_table(phones_dir / "extra_questions.int", [])
    align = sorted({f"{e.word} {e.word} {' '.join(e.phones)}" for e in d.lexicon}
                   | {f"<eps> <eps> {d.optional_silence}"})
    _write_table(phones_dir / "align_lexicon.txt", align)
    _write_table(phones_dir / "align_lexicon.int", [
        " ".join([str(word_id[f[0]]), str(word_id[f[1]]), *(str(phone_id[p]) for p in f[2:])])
        for f in (line.split() for line in align)
    ])


def prepare_lang(
    dict_dir: Path, lang_dir: Path, oov_word: str = "<unk>", sil_prob: float = 0.5
) -> None:
    """Build a Kaldi lang dir from ``dict_dir`` (non-position-dependent phones).

    The dir is assembled in a temporary sibling and renamed into place with a done marker
    inside, so a killed run never leaves a complete-looking lang dir.
    """
    d = read_dict_dir(Path(dict_dir))
    lang_dir = Path(lang_dir)
    words = sorted({e.word for e in d.lexicon})
    if oov_word not in words:
        raise AsrdistError(f"{Path(dict_dir) / 'lexicon.txt'}: OOV word {oov_word!r} missing")
    prons_disambig, max_disambig = add_lex_disambig(d.lexicon)
    ndisambig = max_disambig + 1  # one more for the optional silence in L_disambig.fst
    disambig = [f"#{i}" for i in range(ndisambig + 1)]
    phones = ["<eps>", *d.silence, *d.nonsilence, *disambig]
    phone_id = {p: i for i, p in enumerate(phones)}
    word_list = ["<eps>", *words, "#0", "<s>", "</s>"]
    word_id = {w: i for i, w in enumerate(word_list)}

    with staged_dir(lang_dir) as tmp:
        (tmp / "phones").mkdir()
        _write_table(tmp / "phones.txt", [f"{p} {i}" for i, p in enumerate(phones)])
        _write_table(tmp / "words.txt", [f"{w} {i}" for i, w in enumerate(word_list)])
        _write_table(tmp / "oov.txt", [oov_word])
        _write_table(tmp / "oov.int", [str(word_id[oov_word])])
        _write_phone_sets(tmp / "phones", d, disambig, phone_id, word_id)
        (tmp / "topo").write_text(make_topo(
            [phone_id[p] for p in d.nonsilence], [phone_id[p] for p in d.silence]))

        sil = phone_id[d.optional_silence]
        plain = [(word_id[e.word], [phone_id[p] for p in e.phones]) for e in d.lexicon]
        _write_fst(kaldifst.compile(lexicon_fst_text(plain, sil_prob, sil)), tmp / "L.fst")
        with_disambig = [(word_id[e.word], [phone_id[p] for p in pron])
                         for e, pron in zip(d.lexicon, prons_disambig, strict=True)]
        fst = kaldifst.compile(lexicon_fst_text(
            with_disambig, sil_prob, sil, phone_id[f"#{ndisambig}"] if sil_prob > 0 else None))
        add_disambig_self_loops(fst, phone_id["#0"], word_id["#0"])
        _write_fst(fst, tmp / "L_disambig.fst")
        mark_done(tmp, "lang")


def _read_ints(path: Path) -> list[list[int]]:
    if not path.is_file():
        raise AsrdistError(f"{path}: missing (run prepare_lang)")
    return [[int(x) for x in line.split()] for line in path.read_text().splitlines() if line]


@dataclass
class Lang:
    """What training needs from a Kaldi lang dir."""

    path: Path
    words: dict[str, int]
    disambig: list[int]
    phone_sets: list[list[int]]  # phones sharing one tree root (phones/sets.int)
    oov: str
    topo_text: str

    @classmethod
    def load(cls, path: Path) -> Lang:
        path = Path(path)
        if not path.is_dir():
            raise AsrdistError(f"{path}: no such lang dir")
        for name in ("topo", "oov.txt", "L.fst", "phones.txt"):  # phones.txt: copied to exp
            if not (path / name).is_file():
                raise AsrdistError(f"{path / name}: missing (run prepare_lang)")
        return cls(
            path=path,
            words=read_symbols(path / "words.txt"),
            disambig=[x for row in _read_ints(path / "phones" / "disambig.int") for x in row],
            phone_sets=_read_ints(path / "phones" / "sets.int"),
            oov=(path / "oov.txt").read_text().split()[0],
            topo_text=(path / "topo").read_text(),
        )

    def topology(self) -> khg.HmmTopology:
        topo = khg.HmmTopology()
        topo.read(self.topo_text)
        return topo

    def word_ids(self, utt: str, words: list[str], map_oov: bool) -> list[int]:
        """Transcript to word ids; a word missing from words.txt is an error unless map_oov."""
        ids = []
        for w in words:
            if w in self.words:
                ids.append(self.words[w])
            elif map_oov:
                ids.append(self.words[self.oov])
            else:
                raise AsrdistError(
                    f"utterance {utt}: word {w!r} is not in {self.path / 'words.txt'} "
                    "(add it to the lexicon, or pass --map-oov)"
                )
        return ids
