"""AmDiagGmm in final.mdl: written as Kaldi does, read back into numpy and into khg."""

from __future__ import annotations

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before anything loading kaldifst)
import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.kaldi.am_gmm import compute_gconsts, to_khg_am_diag_gmm
from asrdist.kaldi.final_mdl import read_am_diag_gmm, write_final_mdl

TOPO = (
    "<Topology> <TopologyEntry> <ForPhones> 1 2 </ForPhones> "
    "<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.5 </State> "
    "<State> 1 <PdfClass> 1 <Transition> 1 0.5 <Transition> 2 0.5 </State> "
    "<State> 2 </State> </TopologyEntry> </Topology>"
)
DIM = 4


def build_model(seed: int = 0) -> tuple[khg.TransitionModel, khg.AmDiagGmm]:
    topo = khg.HmmTopology()
    topo.read(TOPO)
    ctx_dep = khg.monophone_context_dependency(topo.phones, topo.get_phone_to_num_pdf_classes())
    tm = khg.TransitionModel(ctx_dep, topo)
    rng = np.random.default_rng(seed)
    am = khg.AmDiagGmm()
    for pdf in range(tm.num_pdfs):
        n = 1 + pdf % 3
        gmm = khg.DiagGmm(n, DIM)
        gmm.set_weights((np.ones(n) / n).astype(np.float32))
        gmm.set_invvars_and_means(
            rng.uniform(0.5, 2.0, (n, DIM)).astype(np.float32),
            rng.normal(size=(n, DIM)).astype(np.float32),
        )
        gmm.compute_gconsts()
        am.add_pdf(gmm)
    return tm, am


@pytest.mark.parametrize("binary", [True, False])
def test_round_trip_preserves_parameters_and_likelihoods(tmp_path, binary):
    tm, am = build_model()
    path = tmp_path / "final.mdl"
    write_final_mdl(path, tm, am, binary=binary)
    params = read_am_diag_gmm(path)
    assert params.dim == DIM and params.num_pdfs == am.num_pdfs
    tol = 0 if binary else 1e-6
    for pdf, p in enumerate(params.pdfs):
        ref = am.get_pdf(pdf)
        np.testing.assert_allclose(p.weights, ref.weights, rtol=tol)
        np.testing.assert_allclose(p.inv_vars, ref.inv_vars, rtol=tol)
        np.testing.assert_allclose(p.means_invvars, ref.means_invvars, rtol=tol, atol=1e-7)
        np.testing.assert_allclose(p.gconsts, ref.gconsts, rtol=tol, atol=1e-5)
    rebuilt = to_khg_am_diag_gmm(params)
    x = np.random.default_rng(1).normal(size=DIM).astype(np.float32)
    for pdf in range(am.num_pdfs):
        assert rebuilt.log_likelihood(pdf, x) == pytest.approx(am.log_likelihood(pdf, x), rel=1e-5)


def test_gconsts_formula_matches_khg():
    _, am = build_model(3)
    gmm = am.get_pdf(2)
    ours = compute_gconsts(np.asarray(gmm.weights), gmm.means_invvars, gmm.inv_vars)
    np.testing.assert_allclose(ours, gmm.gconsts, rtol=1e-5)


def test_text_layout_has_kaldis_tokens_in_order(tmp_path):
    tm, am = build_model()
    path = tmp_path / "final.mdl"
    write_final_mdl(path, tm, am, binary=False)
    text = path.read_text()
    after = text.split("</TransitionModel> \n", 1)[1]
    assert after.startswith(f"<DIMENSION> {DIM} <NUMPDFS> {am.num_pdfs} <DiagGMM> \n<GCONSTS>  [ ")
    order = ["<GCONSTS>", "<WEIGHTS>", "<MEANS_INVVARS>", "<INV_VARS>", "</DiagGMM>"]
    positions = [after.index(tok) for tok in order]
    assert positions == sorted(positions)
    assert after.count("<DiagGMM>") == am.num_pdfs


def test_inconsistent_gmm_sizes_name_the_pdf(tmp_path):
    tm, am = build_model()
    path = tmp_path / "final.mdl"
    write_final_mdl(path, tm, am, binary=False)
    text = path.read_text().replace(f"<DIMENSION> {DIM}", f"<DIMENSION> {DIM + 1}")
    path.write_text(text)
    with pytest.raises(AsrdistError, match=r"final\.mdl: pdf 0: inconsistent GMM sizes"):
        read_am_diag_gmm(path)
