"""The lang dir as GMM training reads it, and per-utterance training graphs (compile-train-graphs).

A training graph is H o C o L o (linear transcript), with HMM self-loops, its input labels
transition-ids: every path is one way of aligning the transcript to frames.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import kaldifst

from asrdist.data.kaldi_dir import read_symbols
from asrdist.errors import AsrdistError


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


class GraphCompiler:
    """Compiles transcripts into training graphs (Kaldi's compile-train-graphs, default scales)."""

    def __init__(self, lang: Lang, tree: khg.ContextDependency, trans_model: khg.TransitionModel):
        lex = kaldifst.StdVectorFst.read(str(lang.path / "L.fst"))
        if lex is None:
            raise AsrdistError(f"{lang.path / 'L.fst'}: cannot read FST")
        if not lex.is_olabel_sorted:
            kaldifst.arcsort(lex, sort_type="olabel")
        self._compiler = khg.TrainingGraphCompiler(
            trans_model=trans_model,
            ctx_dep=tree,
            lex_fst=lex,
            disambig_syms=lang.disambig,
            opts=khg.TrainingGraphCompilerOptions(),
        )

    def compile(self, word_ids: list[int]) -> kaldifst.StdVectorFst:
        return self._compiler.compile_graph_from_text(word_ids)
