"""final.mdl TransitionModel: Kaldi's layout, and tid->pdf maps equal to khg's own."""

from __future__ import annotations

import re
import struct

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before anything loading kaldifst)
import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.kaldi.final_mdl import read_final_mdl, write_final_mdl
from asrdist.kaldi.io_funcs import KaldiWriter
from asrdist.kaldi.transition_model import (
    read_transition_model,
    transition_info_from_khg,
    write_transition_model,
)

# Kaldi's default topology shape: 3-state nonsilence phones (2..4), 5-state silence phone (1).
TOPO = """<Topology>
<TopologyEntry>
<ForPhones>
2 3 4
</ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.75 <Transition> 1 0.25 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.75 <Transition> 2 0.25 </State>
<State> 2 <PdfClass> 2 <Transition> 2 0.75 <Transition> 3 0.25 </State>
<State> 3 </State>
</TopologyEntry>
<TopologyEntry>
<ForPhones>
1
</ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.25 <Transition> 1 0.25 <Transition> 2 0.25
  <Transition> 3 0.25 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.25 <Transition> 2 0.25 <Transition> 3 0.25
  <Transition> 4 0.25 </State>
<State> 2 <PdfClass> 2 <Transition> 1 0.25 <Transition> 2 0.25 <Transition> 3 0.25
  <Transition> 4 0.25 </State>
<State> 3 <PdfClass> 3 <Transition> 1 0.25 <Transition> 2 0.25 <Transition> 3 0.25
  <Transition> 4 0.25 </State>
<State> 4 <PdfClass> 4 <Transition> 4 0.75 <Transition> 5 0.25 </State>
<State> 5 </State>
</TopologyEntry>
</Topology>
"""

# A chain-style topology: self-loop and forward transitions use different pdf-classes.
TUPLES_TOPO = """<Topology>
<TopologyEntry>
<ForPhones>
1 2
</ForPhones>
<State> 0 <ForwardPdfClass> 0 <SelfLoopPdfClass> 1 <Transition> 0 0.5 <Transition> 1 0.5 </State>
<State> 1 </State>
</TopologyEntry>
</Topology>
"""


def monophone_model(topo_text: str) -> tuple[khg.TransitionModel, khg.ContextDependency]:
    """Built as Kaldi's gmm-init-mono does: monophone tree + TransitionModel(tree, topo)."""
    topo = khg.HmmTopology()
    topo.read(topo_text)
    ctx_dep = khg.monophone_context_dependency(topo.phones, topo.get_phone_to_num_pdf_classes())
    return khg.TransitionModel(ctx_dep, topo), ctx_dep


def khg_map(tm: khg.TransitionModel) -> list[int]:
    return [tm.transition_id_to_pdf(t) for t in range(1, tm.num_transition_ids + 1)]


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("topo_text", [TOPO, TUPLES_TOPO], ids=["triples", "tuples"])
def test_tid_to_pdf_read_back_equals_khg(tmp_path, binary, topo_text):
    tm, _ = monophone_model(topo_text)
    path = tmp_path / "final.mdl"
    write_final_mdl(path, tm, binary=binary)
    assert path.read_bytes().startswith(b"\0B") == binary
    info = read_transition_model(path)
    assert info.tid_to_pdf[0] == -1
    assert info.tid_to_pdf[1:].tolist() == khg_map(tm)
    assert info.num_pdfs == tm.num_pdfs
    assert info.num_transition_ids == tm.num_transition_ids
    assert info.phones == list(tm.phones)
    phones = [tm.transition_id_to_phone(t) for t in range(1, tm.num_transition_ids + 1)]
    assert info.tid_to_phone[1:].tolist() == phones
    np.testing.assert_allclose(info.log_probs, tm.log_probs, rtol=1e-6 if not binary else 0)


def _words(text: str) -> list[str | float]:
    """Whitespace-split words with numbers parsed (khg prints 6 digits, Kaldi files 7)."""
    out: list[str | float] = []
    for w in text.split():
        out.append(float(w) if re.fullmatch(r"-?[0-9.e+-]+", w) else w)
    return out


@pytest.mark.parametrize("topo_text", [TOPO, TUPLES_TOPO], ids=["triples", "tuples"])
def test_text_form_matches_kaldis_own_text_write(tmp_path, topo_text):
    """khg's str() is Kaldi's TransitionModel::Write(text) (at ostream precision 6)."""
    tm, _ = monophone_model(topo_text)
    path = tmp_path / "final.mdl"
    write_final_mdl(path, tm, binary=False)
    ours, theirs = path.read_text(), str(tm)
    assert ours.count("\n") == theirs.count("\n")
    for a, b in zip(_words(ours), _words(theirs), strict=True):
        assert a == pytest.approx(b, rel=1e-5) if isinstance(a, float) else a == b
    assert "<Triples>" in ours if topo_text == TOPO else "<Tuples>" in ours


def test_binary_layout_is_kaldis():
    """Hand-assembled bytes of TransitionModel::Write(binary) for a 1-phone, 1-state model."""
    tm, _ = monophone_model(
        "<Topology> <TopologyEntry> <ForPhones> 1 </ForPhones> "
        "<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.5 </State> "
        "<State> 1 </State> </TopologyEntry> </Topology>"
    )
    writer = KaldiWriter(binary=True)
    write_transition_model(writer, transition_info_from_khg(tm))

    def i32(v: int) -> bytes:
        return b"\x04" + struct.pack("<i", v)

    def f32(v: float) -> bytes:
        return b"\x04" + struct.pack("<f", v)

    half = float(np.log(np.float32(0.5)).astype(np.float32))
    expected = (
        b"\0B<TransitionModel> <Topology> "
        + b"\x04"
        + struct.pack("<ii", 1, 1)  # phones [1]
        + b"\x04"
        + struct.pack("<iii", 2, -1, 0)  # phone2idx [-1, 0]
        + i32(1)  # one entry
        + i32(2)  # two states
        + i32(0)
        + i32(2)
        + i32(0)
        + f32(0.5)
        + i32(1)
        + f32(0.5)
        + i32(-1)
        + i32(0)
        + b"</Topology> <Triples> "
        + i32(1)
        + i32(1)
        + i32(0)
        + i32(0)
        + b"</Triples> "
        + b"<LogProbs> FV "
        + i32(3)
        + struct.pack("<fff", 0.0, half, half)
        + b"</LogProbs> </TransitionModel> "
    )
    assert writer.getvalue() == expected


OLD_TRIPLES_MDL = """<TransitionModel>
<Topology>
<TopologyEntry>
<ForPhones> 1 2 </ForPhones>
<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.5 </State>
<State> 1 <PdfClass> 1 <Transition> 1 0.5 <Transition> 2 0.5 </State>
<State> 2 </State>
</TopologyEntry>
</Topology>
<Triples> 4
1 0 0
1 1 1
2 0 2
2 1 2
</Triples>
<LogProbs>
 [ 0 -0.69 -0.69 -0.69 -0.69 -0.69 -0.69 -0.69 -0.69 ]
</LogProbs>
</TransitionModel>
"""


def test_old_style_triples_text_model_parses_to_the_right_map(tmp_path):
    path = tmp_path / "final.mdl"
    path.write_text(OLD_TRIPLES_MDL)
    info = read_transition_model(path)
    # Transition-states in file order, two transitions each (self-loop first, then forward).
    assert info.tid_to_pdf.tolist() == [-1, 0, 0, 1, 1, 2, 2, 2, 2]
    assert info.tid_to_phone.tolist() == [0, 1, 1, 1, 1, 2, 2, 2, 2]
    assert info.num_pdfs == 3 and info.num_transition_ids == 8
    trans, am = read_final_mdl(path)
    assert am is None and trans.tuples == info.tuples


def test_handwritten_tuples_map_uses_self_loop_pdf_for_self_loops(tmp_path):
    text = OLD_TRIPLES_MDL.replace("<Triples> 4", "<Tuples> 4").replace("</Triples>", "</Tuples>")
    text = text.replace("1 0 0\n1 1 1\n2 0 2\n2 1 2\n", "1 0 0 5\n1 1 1 6\n2 0 2 7\n2 1 2 8\n")
    path = tmp_path / "final.mdl"
    path.write_text(text)
    assert read_transition_model(path).tid_to_pdf.tolist() == [-1, 5, 0, 6, 1, 7, 2, 8, 2]


@pytest.mark.parametrize(
    "content",
    [b"", b"<Nnet3> garbage", b"\0B<DIMENSION> \x04\x03\x00\x00\x00", b"\x1f\x8b\x08\x00junk"],
    ids=["empty", "nnet3", "am-only", "gzip"],
)
def test_not_a_final_mdl_is_one_error_naming_it(tmp_path, content):
    path = tmp_path / "final.mdl"
    path.write_bytes(content)
    with pytest.raises(AsrdistError, match=r"final\.mdl: not a Kaldi final\.mdl") as err:
        read_transition_model(path)
    assert "\n" not in str(err.value.message)


def test_truncated_final_mdl_names_the_file(tmp_path):
    tm, _ = monophone_model(TOPO)
    path = tmp_path / "final.mdl"
    write_final_mdl(path, tm)
    path.write_bytes(path.read_bytes()[:150])
    with pytest.raises(AsrdistError, match=r"final\.mdl: unexpected end of file"):
        read_transition_model(path)
