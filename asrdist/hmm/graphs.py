"""Per-utterance training graphs (compile-train-graphs) from a lang dir.

A training graph is H o C o L o (linear transcript), with HMM self-loops, its input labels
transition-ids: every path is one way of aligning the transcript to frames. As Kaldi's
compile-train-graphs, the graphs carry no transition probabilities (transition and self-loop
scale 0): alignment adds the current model's (gmm-align-compiled); graphs holding the initial
ones as well would count them twice, and the flat start's first realignment lost almost every
utterance so.
"""

from __future__ import annotations

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import kaldifst

from asrdist.errors import AsrdistError
from asrdist.kaldi.lang import Lang


class GraphCompiler:
    """Compiles transcripts into training graphs (Kaldi's compile-train-graphs)."""

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
            opts=khg.TrainingGraphCompilerOptions(transition_scale=0.0, self_loop_scale=0.0),
        )

    def compile(self, word_ids: list[int]) -> kaldifst.StdVectorFst:
        return self._compiler.compile_graph_from_text(word_ids)
