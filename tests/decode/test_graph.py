"""HCLG building: Kaldi graph dir contents, const FSTs, trees, and a model/tree mismatch."""

from __future__ import annotations

import shutil
import subprocess

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import kaldifst
import numpy as np
import pytest

from asrdist.decode.graph import fst_chunks, make_graph, max_ilabel, read_fst
from asrdist.decode.lattice import LatticeDecoder, best_path
from asrdist.decode.lattice.native import search_graph
from asrdist.errors import AsrdistError
from asrdist.fsutil import is_done
from asrdist.hmm.tree import read_tree


def test_graph_dir_has_kaldi_files(tiny_system, tiny_graph):
    for name in ("lm.arpa", "G.fst", "HCLG.fst", "words.txt", "phones.txt", "num_pdfs",
                 "final.mdl", "phones/align_lexicon.int", "disambig_tid.int",
                 "oov.txt", "oov.int"):  # oov.*: the graph dir is asrdist-lmrescore's lang
        assert (tiny_graph / name).is_file(), name
    assert int((tiny_graph / "num_pdfs").read_text()) == tiny_system.trans.num_pdfs
    hclg = read_fst(tiny_graph / "HCLG.fst")
    assert max_ilabel(tiny_graph / "HCLG.fst") <= tiny_system.trans.num_transition_ids
    disambig = {int(x) for x in (tiny_graph / "disambig_tid.int").read_text().split()}
    labels = {a.ilabel for s in range(hclg.num_states) for a in kaldifst.ArcIterator(hclg, s)}
    assert disambig and not labels & disambig
    assert is_done(tiny_graph, "mkgraph")


def test_const_fst_reads_like_the_vector_one(tiny_graph, tmp_path):
    hclg = read_fst(tiny_graph / "HCLG.fst")
    kaldifst.StdConstFst(hclg).write(str(tmp_path / "HCLG.const.fst"))
    assert str(read_fst(tmp_path / "HCLG.const.fst")) == str(hclg)


def _arcs(fst):
    return [(s, a.ilabel, a.olabel, a.weight.value, a.nextstate)
            for s in range(fst.num_states) for a in kaldifst.ArcIterator(fst, s)]


@pytest.mark.skipif(shutil.which("fstconvert") is None,
                    reason="fstconvert (Debian's libfst-tools) is not installed")
@pytest.mark.parametrize("align", [False, True])
def test_const_fst_of_openfst_fstconvert_reads_and_decodes_as_its_vector_twin(
        tiny_system, tiny_graph, tmp_path, align):
    const = tmp_path / "HCLG.const.fst"
    subprocess.run(["fstconvert", "--fst_type=const", f"--fst_align={str(align).lower()}",
                    str(tiny_graph / "HCLG.fst"), str(const)], check=True)
    vector, got = read_fst(tiny_graph / "HCLG.fst"), read_fst(const)
    assert (got.start, got.num_states) == (vector.start, vector.num_states)
    assert _arcs(got) == _arcs(vector)
    assert [got.final(s) for s in range(got.num_states)] == [
        vector.final(s) for s in range(vector.num_states)]
    assert max_ilabel(const) == max_ilabel(tiny_graph / "HCLG.fst")
    rng = np.random.default_rng(0)
    pdfs = tiny_system.pdf_frames("dog sit on cat")
    scores = rng.normal(-6.0, 1.0, (len(pdfs), tiny_system.trans.num_pdfs)).astype(np.float32)
    scores[np.arange(len(pdfs)), pdfs] += 3.0
    hyps = [best_path(LatticeDecoder(g, tiny_system.trans, native=False).decode(scores), 10.0,
                      0.0).words for g in (vector, got)]
    assert hyps[1] == hyps[0] and hyps[0]
    # the compiled search: the const file mapped, the vector one converted; the same lattices
    lats = [LatticeDecoder(g, tiny_system.trans, native=True).decode(scores)
            for g in (tiny_graph / "HCLG.fst", const)]
    assert lats[1] == lats[0] and lats[0].num_states > 1


def test_truncated_or_foreign_fst_is_one_line_naming_the_file(tiny_graph, tmp_path):
    data = (tiny_graph / "HCLG.fst").read_bytes()
    kaldifst.StdConstFst(read_fst(tiny_graph / "HCLG.fst")).write(str(tmp_path / "c.fst"))
    const = (tmp_path / "c.fst").read_bytes()
    cases = {"short.fst": const[:-20], "short_vector.fst": data[:-20],
             "text.fst": b"0 1 1 1\n1\n", "head.fst": const[:30],
             "type.fst": const.replace(b"const", b"compa", 1)}
    for name, raw in cases.items():
        (tmp_path / name).write_bytes(raw)
        for read in (read_fst, lambda p: list(fst_chunks(p)), search_graph):
            with pytest.raises(AsrdistError) as err:
                read(tmp_path / name)
            message = str(err.value)
            assert message.startswith(str(tmp_path / name)) and "\n" not in message, message


def test_tree_file_round_trips(tiny_system):
    tree = read_tree(tiny_system.mono / "tree")
    assert (tree.context_width, tree.central_position) == (1, 0)
    assert tree.num_pdfs == tiny_system.trans.num_pdfs


def test_tree_of_another_model_is_refused(tiny_system, tmp_path):
    phones = list(range(1, 12))
    other = khg.monophone_context_dependency(phones, [-1] + [2] * 11)
    other.write(True, str(tmp_path / "tree"))
    with pytest.raises(AsrdistError, match="tree does not produce this model's transition"):
        make_graph(tiny_system.lang, tiny_system.mono / "final.mdl", tiny_system.train_text,
                   tmp_path / "graph", tree_path=tmp_path / "tree")
    assert not is_done(tmp_path / "graph", "mkgraph")


def test_monophone_tree_is_made_when_the_model_has_none(tiny_system, tiny_graph, tmp_path):
    (tmp_path / "mono").mkdir()
    shutil.copy(tiny_system.mono / "final.mdl", tmp_path / "mono" / "final.mdl")
    out = make_graph(tiny_system.lang, tmp_path / "mono" / "final.mdl", tiny_system.train_text,
                     tmp_path / "graph")
    assert str(read_fst(out / "HCLG.fst")) == str(read_fst(tiny_graph / "HCLG.fst"))
