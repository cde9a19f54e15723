"""Priors from pdf_counts, zero counts floored."""

from __future__ import annotations

import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.train.priors import log_priors, read_pdf_counts


def test_log_priors_floor_zero_counts(tmp_path):
    (tmp_path / "pdf_counts").write_text("[ 6 0 3 ]\n")
    counts = read_pdf_counts(tmp_path / "pdf_counts", 3)
    priors = log_priors(counts)
    assert np.isfinite(priors).all()
    np.testing.assert_allclose(np.exp(priors), [0.6, 0.1, 0.3], rtol=1e-6)


def test_count_vector_of_the_wrong_length(tmp_path):
    (tmp_path / "pdf_counts").write_text("[ 1 2 ]\n")
    with pytest.raises(AsrdistError, match="2 pdf counts for 3 pdfs"):
        read_pdf_counts(tmp_path / "pdf_counts", 3)
