"""Pdf priors from the alignment frame counts (asrdist.data.ingest.read_pdf_counts), for hybrid
decoding; the trainer stores them in final.pt.

Decoding divides posteriors by priors: log p(x|s) = log p(s|x) - log p(s) + const.
"""

from __future__ import annotations

import numpy as np

# Log prior given to pdfs never seen in the alignments: large enough that their pseudo
# log-likelihood (log posterior - log prior) never wins a frame, small enough to stay finite.
UNSEEN_LOG_PRIOR = 1.0e4


def log_priors(counts: np.ndarray, floor: float = 1.0) -> np.ndarray:
    """log of normalized counts; pdfs with fewer than ``floor`` frames are disabled.

    A pdf the alignments never used (e.g. a skippable silence state) has a near-zero prior,
    so dividing by it would make it win every frame it is allowed in: 37% of frames on the
    mini corpus before this rule. As Kaldi nnet1's PdfPrior does, such pdfs get a huge log
    prior instead (UNSEEN_LOG_PRIOR), which removes them from decoding.
    """
    counts = np.asarray(counts, dtype=np.float64)
    seen = counts >= floor
    out = np.full(len(counts), UNSEEN_LOG_PRIOR)
    out[seen] = np.log(counts[seen] / counts[seen].sum())
    return out.astype(np.float32)
