"""Priors from pdf_counts; pdfs never seen in the alignments are disabled for decoding."""

from __future__ import annotations

import numpy as np
import pytest

from asrdist.data.ingest import read_pdf_counts
from asrdist.errors import AsrdistError
from asrdist.train.priors import log_priors


def test_unseen_pdfs_can_never_win_a_frame(tmp_path):
    (tmp_path / "pdf_counts").write_text("[ 6 0 3 ]\n")
    counts = read_pdf_counts(tmp_path, 3)
    priors = log_priors(counts)
    assert np.isfinite(priors).all()
    np.testing.assert_allclose(np.exp(priors[[0, 2]]), [6 / 9, 3 / 9], rtol=1e-6)
    # even a near-certain posterior for the unseen pdf loses to a likely seen one
    log_post = np.log(np.array([0.01, 0.98, 0.01]))
    assert np.argmax(log_post - priors) != 1


def test_count_vector_of_the_wrong_length(tmp_path):
    (tmp_path / "pdf_counts").write_text("[ 1 2 ]\n")
    with pytest.raises(AsrdistError, match="2 pdf counts for 3 pdfs"):
        read_pdf_counts(tmp_path, 3)
