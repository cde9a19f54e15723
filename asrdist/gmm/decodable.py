"""The GMM's part in alignment: its decodable, and the silence-boosted model to align with
(gmm-boost-silence)."""

from __future__ import annotations

import kaldi_hmm_gmm as khg  # before kaldifst, which asrdist.hmm.align loads
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.hmm.align import AlignOptions
from asrdist.kaldi.lang import Lang


def optional_silence(lang: Lang) -> list[int]:
    """phones/optional_silence.int: the phone whose models --boost-silence boosts."""
    path = lang.path / "phones" / "optional_silence.int"
    try:
        return [int(x) for x in path.read_text().split()]
    except (OSError, ValueError) as e:
        raise AsrdistError(f"{path}: unreadable ({e}); needed by --boost-silence") from e


def aligning_am(am: khg.AmDiagGmm, trans_model: khg.TransitionModel, silence: list[int],
                factor: float) -> khg.AmDiagGmm | None:
    """The model to align with: silence boosted by ``factor``, or None (the model itself)."""
    return None if factor == 1.0 else boost_silence(am, trans_model, silence, factor)


def boost_silence(am: khg.AmDiagGmm, trans_model: khg.TransitionModel, phones: list[int],
                  boost: float) -> khg.AmDiagGmm:
    """A copy of ``am`` whose pdfs of ``phones`` have their weights times ``boost`` (Kaldi's
    gmm-boost-silence): alignment then prefers silence to a non-silence model for silence."""
    ok, pdfs = khg.get_pdfs_for_phones(trans_model, phones)
    if not ok:
        raise AsrdistError(f"phones {phones} share pdfs with other phones: cannot boost silence")
    boosted = khg.AmDiagGmm()
    boosted.copy_from_am_diag_gmm(am)
    for pdf in pdfs:
        gmm = boosted.get_pdf(pdf)  # a reference into ``boosted``
        gmm.set_weights(np.asarray(gmm.weights, dtype=np.float32) * boost)
        gmm.compute_gconsts()
    return boosted


def gmm_decodable(am: khg.AmDiagGmm, trans_model: khg.TransitionModel, feats: np.ndarray,
                  opts: AlignOptions) -> khg.DecodableInterface:
    """GMM log-likelihoods of every transition-id's pdf, times the acoustic scale.

    khg keeps a pointer to ``am``, not a reference: the caller keeps ``am`` alive while the
    decodable is in use (a freed one crashes the process)."""
    return khg.DecodableAmDiagGmmScaled(am=am, tm=trans_model, feats=feats,
                                        scale=opts.acoustic_scale)
