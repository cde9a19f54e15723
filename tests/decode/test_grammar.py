"""HCLG from a hand-written grammar (asrdist-mkgraph --grammar): one word per utterance."""

from __future__ import annotations

import kaldi_hmm_gmm  # noqa: F401  (before kaldifst, or the process hangs)
import kaldifst
import numpy as np
import pytest

from asrdist.decode.graph import make_graph, read_fst
from asrdist.decode.lattice import LatticeDecoder, best_path
from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import read_symbols
from tests.cli_process import run_cli

ONE_WORD = "0 1 cat cat 0.693147\n0 1 dog dog 0.693147\n1\n"  # start -> cat | dog -> final


@pytest.fixture(scope="module")
def grammar_graph(tiny_system, tmp_path_factory):
    grammar = tmp_path_factory.mktemp("grammar") / "G.txt"
    grammar.write_text(ONE_WORD)
    out = make_graph(tiny_system.lang, tiny_system.mono / "final.mdl", None,
                     grammar.parent / "graph", grammar=grammar)
    return grammar, out


def test_grammar_is_compiled_as_fstcompile_would(tiny_system, grammar_graph):
    _, graph = grammar_graph
    words = read_symbols(tiny_system.lang / "words.txt")
    g = read_fst(graph / "G.fst")
    arcs = [(s, a.ilabel, a.olabel, round(a.weight.value, 6), a.nextstate)
            for s in range(g.num_states) for a in kaldifst.ArcIterator(g, s)]
    assert g.start == 0 and g.num_states == 2
    assert arcs == [(0, words["cat"], words["cat"], 0.693147, 1),
                    (0, words["dog"], words["dog"], 0.693147, 1)]
    assert g.final(1).value == 0.0 and g.final(0).value == float("inf")
    assert not (graph / "lm.arpa").exists()


@pytest.mark.parametrize("spoken, allowed", [("cat", {"cat"}), ("dog", {"dog"}),
                                              ("dog sat", {"cat", "dog"}), ("sit", {"cat", "dog"})])
def test_decoding_gives_exactly_one_word_of_the_grammar(tiny_system, grammar_graph, spoken,
                                                        allowed):
    _, graph = grammar_graph
    ids = {i: w for w, i in read_symbols(graph / "words.txt").items()}
    pdfs = tiny_system.pdf_frames(spoken)
    rng = np.random.default_rng(0)
    scores = rng.normal(-6.0, 1.0, (len(pdfs), tiny_system.trans.num_pdfs)).astype(np.float32)
    scores[np.arange(len(pdfs)), pdfs] += 3.0
    lattice = LatticeDecoder(graph / "HCLG.fst", tiny_system.trans, native=False).decode(scores)
    words = [ids[w] for w in best_path(lattice, 10.0, 0.0).words]
    assert len(words) == 1 and words[0] in allowed, words


@pytest.mark.parametrize("text, message", [
    ("0 1 bird bird\n1\n", ":1: word 'bird' is not in words.txt"),
    ("0 1 cat\n1\n", ":1: expected 'src dst word word [cost]' or 'state [cost]', got 3 fields"),
    ("0 x cat cat\n1\n", ":1: state 'x' is not a number"),
    ("0 1 cat cat high\n1\n", ":1: cost 'high' is not a number"),
])
def test_bad_grammar_line_is_one_error_naming_it(tiny_system, tmp_path, text, message):
    (tmp_path / "G.txt").write_text(text)
    with pytest.raises(AsrdistError) as err:
        make_graph(tiny_system.lang, tiny_system.mono / "final.mdl", None, tmp_path / "graph",
                   grammar=tmp_path / "G.txt")
    assert str(err.value) == f"{tmp_path / 'G.txt'}{message}"


def test_mkgraph_cli_refuses_grammar_with_text_and_builds_with_grammar(tiny_system, tmp_path):
    (tmp_path / "G.txt").write_text(ONE_WORD)
    common = ["--lang", tiny_system.lang, "--model", tiny_system.mono / "final.mdl",
              "--out", tmp_path / "graph"]
    both = run_cli("mkgraph", *common, "--grammar", tmp_path / "G.txt",
                   "--text", tiny_system.train_text)
    assert both.returncode == 1
    assert both.stderr.strip().splitlines()[-1] == (
        "Error: --grammar and --text: give one (a grammar, or the text an n-gram LM is "
        "estimated on), not both")
    neither = run_cli("mkgraph", *common)
    assert neither.returncode == 1 and "give --text" in neither.stderr
    made = run_cli("mkgraph", *common, "--grammar", tmp_path / "G.txt")
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "graph" / "HCLG.fst").is_file()
    again = run_cli("mkgraph", *common, "--grammar", tmp_path / "G.txt")
    assert "mkgraph already done with these options and inputs" in again.stderr
