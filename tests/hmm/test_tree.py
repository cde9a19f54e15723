"""Trees: Kaldi's ContextDependency format, written and read back; monophone trees."""

from __future__ import annotations

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before anything loading kaldifst)
import pytest

from asrdist.errors import AsrdistError
from asrdist.hmm.tree import monophone_tree, read_tree, write_tree
from tests.kaldi.test_transition_model import TOPO, monophone_model


@pytest.mark.parametrize("binary", [True, False])
def test_write_tree_uses_kaldis_context_dependency_format(tmp_path, binary):
    _, ctx_dep = monophone_model(TOPO)
    path = tmp_path / "tree"
    write_tree(path, ctx_dep, binary=binary)
    data = path.read_bytes()
    if binary:
        assert data.startswith(b"\0BContextDependency \x04\x01\x00\x00\x00\x04\x00\x00\x00\x00")
    else:
        assert data.split()[:4] == [b"ContextDependency", b"1", b"0", b"ToPdf"]
    assert b"EndContextDependency" in data


def test_a_tree_reads_back_as_written(tmp_path):
    _, ctx_dep = monophone_model(TOPO)
    write_tree(tmp_path / "tree", ctx_dep)
    tree = read_tree(tmp_path / "tree")
    assert (tree.num_pdfs, tree.context_width) == (ctx_dep.num_pdfs, ctx_dep.context_width)
    write_tree(tmp_path / "text_tree", ctx_dep, binary=False)
    with pytest.raises(AsrdistError, match="not a binary Kaldi tree"):
        read_tree(tmp_path / "text_tree")


def test_a_monophone_tree_needs_phone_sets_covering_the_topology():
    topo = khg.HmmTopology()
    topo.read(TOPO)
    assert monophone_tree(topo, [[1], [2], [3], [4]]).num_pdfs == 5 + 3 * 3
    with pytest.raises(AsrdistError, match="does not cover exactly"):
        monophone_tree(topo, [[1], [2], [3]])
