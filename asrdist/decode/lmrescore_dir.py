"""Rescoring a decode dir's lattices with a new LM, as steps/lmrescore_const_arpa.sh does:

    OLD_LANG (G.fst, words.txt[, oov.int])  NEW_LM  IN_DIR  OUT_DIR

NEW_LM is an ARPA file (.gz or not; its words mapped through OLD_LANG's words.txt, the oov word
as unk, as utils/build_const_arpa_lm.sh does), Kaldi's G.carpa, or a lang dir holding one
(lmrescore_const_arpa.sh's NEW_LANG).

IN_DIR's ``num_jobs`` lattice archives ``lat.N.gz`` are each rescored into OUT_DIR's
``lat.N.gz`` (:func:`asrdist.decode.lmrescore.rescore`), one archive per task as Kaldi's
``$cmd JOB=1:$nj``; ``nj`` jobs (at most the archives' number) take the archives in
contiguous groups, each loading G and the new LM once. Every archive is written atomically
(gzip without name or time, as ``gzip -c`` into a pipe; binary, which keeps the costs exact:
Kaldi's script writes ``ark,t``, which its tools read the same). A lattice left empty (no path
of G or of the new LM accepts its words) is left out with a warning, as the Kaldi binaries
leave it out. The stage is done (asrdist.stage) when OUT holds its marker for the same inputs:
a rerun skips it. :func:`read_rescored_dir` then reads OUT's texts and CTMs off its lattices,
as local/score.sh follows lmrescore_const_arpa.sh.
"""

from __future__ import annotations

import gzip
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from asrdist.decode.arpa import read_arpa
from asrdist.decode.carpa import MAGIC, CarpaLM
from asrdist.decode.lattice_io import compact_lattice_binary
from asrdist.decode.lattice_readings import write_readings
from asrdist.decode.lmrescore import BackoffFst, NgramLM, iter_lattice_archive, rescore
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_path, atomic_write, naming_full_disk
from asrdist.jobs import LOCAL, Runner, split
from asrdist.kaldi.data_dir import read_symbols
from asrdist.progress import progress
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "lmrescore"


@dataclass(frozen=True)
class RescoreInputs:
    """What one job loads: the old LM's G.fst, the new LM (ARPA or G.carpa), words.txt and
    the oov word."""

    g_fst: str
    new_lm: str
    words_txt: str
    oov: str | None

    def load_new_lm(self) -> NgramLM:
        with open(self.new_lm, "rb") as f:
            if f.read(len(MAGIC)) == MAGIC:
                return CarpaLM(self.new_lm)
        return read_arpa(self.new_lm, read_symbols(self.words_txt), self.oov)


@dataclass
class ArchiveResult:
    """One lat.N.gz rescored: its utterances written and those dropped."""

    archive: str
    done: int
    dropped: list[str]


class _Job:
    """One job's old and new LM, loaded once for all its archives."""

    def __init__(self, inputs: RescoreInputs) -> None:
        self.g = BackoffFst(inputs.g_fst)
        self.lm = inputs.load_new_lm()

    def run(self, pairs: list[tuple[str, str]]) -> Iterator[tuple[str, str, bool]]:
        """Rescore each (in, out) archive; per lattice (a progress step): the output archive,
        the utterance and whether it was kept."""
        for src, dst in pairs:
            with naming_full_disk(dst, "lattices"), atomic_path(dst) as tmp, \
                    open(tmp, "wb") as raw, \
                    gzip.GzipFile("", "wb", compresslevel=6, fileobj=raw, mtime=0) as out:
                for key, clat in iter_lattice_archive(src):
                    rescored = rescore(clat, self.g, self.lm)
                    if rescored is not None:
                        out.write(compact_lattice_binary(key, rescored))
                    yield dst, key, rescored is not None


def rescore_inputs(old_lang: str | os.PathLike, new_lm: str | os.PathLike) -> RescoreInputs:
    """OLD_LANG's G.fst and words.txt, its oov word (oov.int or oov.txt: unk of an ARPA LM, as
    build_const_arpa_lm.sh's --unk-symbol) and NEW_LM (NEW_LM/G.carpa for a dir), checked
    before any job starts."""
    lang = Path(old_lang)
    for name in ("G.fst", "words.txt"):
        if not (lang / name).is_file():
            raise AsrdistError(f"{lang / name}: missing (OLD_LANG must hold the old LM's G.fst "
                               "and its words.txt)")
    if Path(new_lm).is_dir():
        new_lm = Path(new_lm) / "G.carpa"
    if not Path(new_lm).is_file():
        raise AsrdistError(f"{new_lm}: no such file (NEW_LM: an ARPA file, a G.carpa or a lang "
                           "dir with one)")
    words = read_symbols(lang / "words.txt")
    oov = None
    if (lang / "oov.int").is_file():
        ids = {i: w for w, i in words.items()}
        text = (lang / "oov.int").read_text().split()
        if len(text) != 1 or not text[0].isdigit() or int(text[0]) not in ids:
            raise AsrdistError(f"{lang / 'oov.int'}: not a word id of {lang / 'words.txt'}")
        oov = ids[int(text[0])]
    elif (lang / "oov.txt").is_file():
        oov = (lang / "oov.txt").read_text().strip() or None
    else:
        log.warning("%s: no oov.int or oov.txt: words the new LM lacks get no LM score and "
                    "their paths are dropped", lang)
    return RescoreInputs(str(lang / "G.fst"), str(new_lm), str(lang / "words.txt"), oov)


def input_archives(in_dir: str | os.PathLike) -> list[Path]:
    """IN_DIR/lat.1.gz .. lat.<num_jobs>.gz, all of them there."""
    src = Path(in_dir)
    try:
        num_jobs = int((src / "num_jobs").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        raise AsrdistError(f"{src / 'num_jobs'}: missing or not a number (is {src} a decode "
                           "dir with lattices?)") from None
    archives = [src / f"lat.{n}.gz" for n in range(1, num_jobs + 1)]
    missing = [a.name for a in archives if not a.is_file()]
    if missing:
        raise AsrdistError(f"{src}: no {', '.join(missing[:3])}"
                           f"{' ...' if len(missing) > 3 else ''} (num_jobs says {num_jobs})")
    return archives


def check_same_words(decoded: Path, lang: Path) -> None:
    """Refuse lattices decoded with a graph of other words than OLD_LANG's (the decode dir's
    copy of its graph's words.txt, where asrdist-decode wrote one): every word id would be
    read as another word, and every lattice dropped."""
    if decoded.is_file() and read_symbols(decoded) != read_symbols(lang):
        raise AsrdistError(f"{decoded}: the lattices were made with a graph of other words "
                           f"than {lang}: rescore with the lang dir that graph was made from")


def rescore_decode_dir(old_lang: str | os.PathLike, new_lm: str | os.PathLike,
                       in_dir: str | os.PathLike, out_dir: str | os.PathLike,
                       nj: int | None = None, runner: Runner = LOCAL
                       ) -> list[ArchiveResult] | Skipped:
    """Write OUT/lat.N.gz and OUT/num_jobs; Skipped when OUT is done with these inputs."""
    if Path(in_dir).resolve() == Path(out_dir).resolve():
        raise AsrdistError(f"{out_dir}: the output dir is the input dir; rescore into another "
                           "(its lattices would be overwritten)")
    inputs = rescore_inputs(old_lang, new_lm)
    archives = input_archives(in_dir)
    check_same_words(Path(in_dir) / "words.txt", Path(inputs.words_txt))
    nj = len(archives) if nj is None else nj
    if nj < 1:
        raise AsrdistError(f"--nj {nj}: must be at least 1")
    out = Path(out_dir)
    check = check_done(out, STAGE, {"old_lm_scale": -1.0, "new_lm_scale": 1.0},
                       [inputs.g_fst, inputs.words_txt, Path(old_lang) / "oov.int",
                        inputs.new_lm, *archives])
    if check.done:
        return check.skipped()
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("lat.*.gz"):  # none of an older run with more jobs may stay behind
        if re.fullmatch(r"lat\.[0-9]+\.gz", old.name):
            old.unlink()
    pairs = [(str(a), str(out / a.name)) for a in archives]
    groups = split(pairs, nj)
    with progress(None, "lmrescore", "lat") as bar, \
            runner.start(STAGE, _Job, [(inputs,)] * len(groups)) as jobs:
        steps = [step for part in jobs.call_each("run", [(g,) for g in groups], bar)
                 for step in part]
    if steps and not any(kept for _, _, kept in steps):
        for _, dst in pairs:
            Path(dst).unlink(missing_ok=True)
        raise AsrdistError(f"{in_dir}: every one of its {len(steps)} lattices is empty after "
                           f"rescoring with {new_lm} (made with another graph than "
                           f"{old_lang}'s, or an LM of other words?): nothing written")
    with atomic_write(out / "num_jobs") as f:
        f.write(f"{len(archives)}\n")
    results = {dst: ArchiveResult(dst, 0, []) for _, dst in pairs}
    for dst, key, kept in steps:
        if kept:
            results[dst].done += 1
        else:
            results[dst].dropped.append(key)
            log.warning("%s: empty lattice for utterance %s after rescoring (incompatible "
                        "LM?): left out", dst, key)
    check.mark_done()
    return list(results.values())



def read_rescored_dir(old_lang: str | os.PathLike, data_dir: str | os.PathLike,
                      in_dir: str | os.PathLike, out_dir: str | os.PathLike,
                      trans_mdl: str | os.PathLike | None, lmwts: tuple[float, ...],
                      wips: tuple[float, ...], acwt: float = 0.1) -> None:
    """OUT's texts and CTMs off its rescored lattices (:func:`write_readings`), spelled with
    OLD_LANG's words.txt; word times from ``trans_mdl`` (else IN_DIR/../final.mdl, where
    Kaldi's scoring looks, else OLD_LANG/final.mdl, where asrdist-mkgraph puts one) and
    OLD_LANG/phones/align_lexicon.int."""
    lang = Path(old_lang)
    if trans_mdl is None:
        trans_mdl = next((p for p in (Path(in_dir).parent / "final.mdl", lang / "final.mdl")
                          if p.is_file()), None)
    lexicon = lang / "phones" / "align_lexicon.int"
    lattices = (pair for a in input_archives(out_dir) for pair in iter_lattice_archive(a))
    write_readings(out_dir, lattices, data_dir, lang / "words.txt", trans_mdl,
                   lexicon if lexicon.is_file() else None, lmwts, wips, acwt)
