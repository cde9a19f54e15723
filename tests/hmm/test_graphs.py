"""Training graphs carry no transition probabilities: alignment adds the current ones."""

from __future__ import annotations

import kaldi_hmm_gmm as khg  # before kaldifst
import kaldifst
import numpy as np

from asrdist.hmm.graphs import GraphCompiler
from asrdist.hmm.transitions import transition_model_with_log_probs
from asrdist.hmm.tree import monophone_tree
from asrdist.kaldi.lang import Lang
from tests.gmm.synth_corpus import make_corpus


def _weights(fst: kaldifst.StdVectorFst) -> list[float]:
    return [float(arc.weight.value) for s in range(fst.num_states)
            for arc in kaldifst.ArcIterator(fst, s)]


def test_graph_weights_do_not_depend_on_the_transition_model(tmp_path) -> None:
    """compile-train-graphs compiles with transition and self-loop scale 0, as train_mono.sh
    relies on: gmm-align-compiled adds the current model's probabilities, so graphs holding
    the initial ones too would count them twice (the flat start lost its utterances so)."""
    corpus = make_corpus(tmp_path, num_utts=1)
    lang = Lang.load(corpus.lang)
    topo = lang.topology()
    tree = monophone_tree(topo, lang.phone_sets)
    flat = khg.TransitionModel(ctx_dep=tree, hmm_topo=topo)
    rng = np.random.default_rng(0)
    skewed = transition_model_with_log_probs(
        tree, topo, np.log(rng.uniform(0.05, 1.0, flat.num_transition_ids + 1)))
    words = lang.word_ids("u", ["cab", "ba"], False)
    a = GraphCompiler(lang, tree, flat).compile(words)
    b = GraphCompiler(lang, tree, skewed).compile(words)
    assert a.num_states == b.num_states > 0
    assert _weights(a) == _weights(b)
    self_loops = [arc for s in range(a.num_states) for arc in kaldifst.ArcIterator(a, s)
                  if arc.nextstate == s and arc.ilabel > 0]
    assert self_loops and all(arc.weight.value == 0.0 for arc in self_loops)
