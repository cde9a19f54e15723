"""Kaldi's ``final.mdl`` as a whole: its TransitionModel, then (a GMM system's) AmDiagGmm.

Here, not in either part's module, so that neither part needs the other.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.am_gmm import (
    AmDiagGmmParams,
    am_params_from_khg,
    parse_am_diag_gmm,
    write_am_diag_gmm,
)
from asrdist.kaldi.io_funcs import KaldiWriter
from asrdist.kaldi.transition_model import (
    TransitionInfo,
    open_model,
    parse_transition_model,
    transition_info_from_khg,
    write_transition_model,
)

if TYPE_CHECKING:
    import kaldi_hmm_gmm as khg


def read_final_mdl(path: str | os.PathLike) -> tuple[TransitionInfo, AmDiagGmmParams | None]:
    """TransitionModel and, when present, the AmDiagGmm that follows it."""
    reader = open_model(path)
    trans = parse_transition_model(reader)
    if reader.at_end():
        return trans, None
    return trans, parse_am_diag_gmm(reader)


def read_am_diag_gmm(path: str | os.PathLike) -> AmDiagGmmParams:
    """The AmDiagGmm that follows the TransitionModel in a GMM ``final.mdl``."""
    _, am = read_final_mdl(path)
    if am is None:
        raise AsrdistError(f"{path}: final.mdl has no AmDiagGmm after the TransitionModel")
    return am


def write_final_mdl(
    path: str | os.PathLike,
    trans_model: khg.TransitionModel | TransitionInfo,
    am_gmm: khg.AmDiagGmm | AmDiagGmmParams | None = None,
    binary: bool = True,
) -> None:
    """Write Kaldi's ``final.mdl`` (TransitionModel, then the AmDiagGmm if given), atomically."""
    if not isinstance(trans_model, TransitionInfo):
        trans_model = transition_info_from_khg(trans_model)
    if am_gmm is not None and not isinstance(am_gmm, AmDiagGmmParams):
        am_gmm = am_params_from_khg(am_gmm)
    if am_gmm is not None and am_gmm.num_pdfs != trans_model.num_pdfs:
        raise ValueError(
            f"AmDiagGmm has {am_gmm.num_pdfs} pdfs but the TransitionModel {trans_model.num_pdfs}"
        )
    writer = KaldiWriter(binary)
    write_transition_model(writer, trans_model)
    if am_gmm is not None:
        write_am_diag_gmm(writer, am_gmm)
    with atomic_write(path, "wb") as f:
        f.write(writer.getvalue())
