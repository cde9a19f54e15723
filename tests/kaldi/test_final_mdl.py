"""final.mdl as a whole: a TransitionModel alone or followed by the GMMs of its pdfs."""

from __future__ import annotations

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before anything loading kaldifst)
import pytest

from asrdist.errors import AsrdistError
from asrdist.kaldi.final_mdl import read_am_diag_gmm, read_final_mdl, write_final_mdl
from tests.kaldi.test_am_gmm import build_model


def test_model_without_gmms_is_reported(tmp_path):
    tm, _ = build_model()
    path = tmp_path / "final.mdl"
    write_final_mdl(path, tm)
    assert read_final_mdl(path)[1] is None
    with pytest.raises(AsrdistError, match=r"final\.mdl: final\.mdl has no AmDiagGmm"):
        read_am_diag_gmm(path)


def test_gmms_must_be_the_transition_models_pdfs(tmp_path):
    tm, am = build_model()
    fewer = khg.AmDiagGmm()
    fewer.add_pdf(am.get_pdf(0))
    with pytest.raises(ValueError, match="AmDiagGmm has 1 pdfs"):
        write_final_mdl(tmp_path / "final.mdl", tm, fewer)
    assert not (tmp_path / "final.mdl").exists()
