"""The GMM features: Kaldi's add-deltas."""

from __future__ import annotations

import numpy as np

from asrdist.kaldi.gmm_feats import add_deltas


def test_add_deltas_on_a_quadratic() -> None:
    t = np.arange(20, dtype=np.float32)
    out = add_deltas(np.stack([t * t, t], axis=1))
    assert out.shape == (20, 6)
    inner = slice(4, 16)  # frames whose 9-frame window does not reach an edge
    assert np.allclose(out[inner, 0], t[inner] ** 2)
    assert np.allclose(out[inner, 2], 2 * t[inner], atol=1e-3)  # d/dt t^2
    assert np.allclose(out[inner, 4], 2.0, atol=1e-3)  # d2/dt2 t^2
    assert np.allclose(out[inner, 3], 1.0) and np.allclose(out[inner, 5], 0.0, atol=1e-5)
    # edges repeat the first/last frame, as Kaldi does: constant input gives zero deltas
    flat = add_deltas(np.ones((3, 2), dtype=np.float32))
    assert np.allclose(flat[:, 2:], 0.0)
