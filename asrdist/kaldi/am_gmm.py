"""Kaldi's AmDiagGmm (the GMMs after the TransitionModel in a GMM ``final.mdl``), in numpy.

Layout (am-diag-gmm.cc / diag-gmm.cc Write): ``<DIMENSION> d <NUMPDFS> n`` then per pdf
``<DiagGMM> <GCONSTS> vec <WEIGHTS> vec <MEANS_INVVARS> mat <INV_VARS> mat </DiagGMM>``.
Reading needs no Kaldi; :func:`to_khg_am_diag_gmm` turns the parameters into a
``kaldi_hmm_gmm.AmDiagGmm`` so a GMM baseline can be decoded with khg.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from asrdist.kaldi.io_funcs import KaldiReader, KaldiWriter

if TYPE_CHECKING:
    import kaldi_hmm_gmm as khg


@dataclass
class DiagGmmParams:
    """One pdf's diagonal GMM as Kaldi stores it (natural form: ``means``, ``variances``)."""

    gconsts: np.ndarray  # (num_gauss,) float32
    weights: np.ndarray  # (num_gauss,) float32
    means_invvars: np.ndarray  # (num_gauss, dim) float32
    inv_vars: np.ndarray  # (num_gauss, dim) float32

    @property
    def means(self) -> np.ndarray:
        return self.means_invvars / self.inv_vars

    @property
    def variances(self) -> np.ndarray:
        return 1.0 / self.inv_vars


@dataclass
class AmDiagGmmParams:
    """All pdfs' GMMs, indexed by pdf-id."""

    dim: int
    pdfs: list[DiagGmmParams]

    @property
    def num_pdfs(self) -> int:
        return len(self.pdfs)


def parse_am_diag_gmm(reader: KaldiReader) -> AmDiagGmmParams:
    """Parse an AmDiagGmm at the reader's position (as AmDiagGmm::Read does)."""
    reader.expect_token("<DIMENSION>")
    dim = reader.read_int32()
    reader.expect_token("<NUMPDFS>")
    num_pdfs = reader.read_int32()
    if num_pdfs <= 0 or dim <= 0:
        raise reader.fail(f"bad AmDiagGmm header: dim {dim}, {num_pdfs} pdfs")
    pdfs = [_parse_diag_gmm(reader, dim, pdf) for pdf in range(num_pdfs)]
    return AmDiagGmmParams(dim=dim, pdfs=pdfs)


def _parse_diag_gmm(reader: KaldiReader, dim: int, pdf: int) -> DiagGmmParams:
    token = reader.read_token()
    if token not in ("<DiagGMM>", "<DiagGMMBegin>"):
        raise reader.fail(f"pdf {pdf}: expected <DiagGMM>, got {token[:40]}")
    token = reader.read_token()
    gconsts = None
    if token == "<GCONSTS>":
        gconsts = reader.read_float_vector().astype(np.float32)
        token = reader.read_token()
    if token != "<WEIGHTS>":
        raise reader.fail(f"pdf {pdf}: expected <WEIGHTS>, got {token[:40]}")
    weights = reader.read_float_vector().astype(np.float32)
    reader.expect_token("<MEANS_INVVARS>")
    means_invvars = reader.read_float_matrix().astype(np.float32)
    reader.expect_token("<INV_VARS>")
    inv_vars = reader.read_float_matrix().astype(np.float32)
    token = reader.read_token()
    if token not in ("</DiagGMM>", "<DiagGMMEnd>"):
        raise reader.fail(f"pdf {pdf}: expected </DiagGMM>, got {token[:40]}")
    n = weights.shape[0]
    if means_invvars.shape != (n, dim) or inv_vars.shape != (n, dim):
        raise reader.fail(
            f"pdf {pdf}: inconsistent GMM sizes (weights {n}, means {means_invvars.shape}, "
            f"inv_vars {inv_vars.shape}, dim {dim})"
        )
    if gconsts is None or gconsts.shape != (n,):
        gconsts = compute_gconsts(weights, means_invvars, inv_vars)
    return DiagGmmParams(gconsts, weights, means_invvars, inv_vars)


def compute_gconsts(
    weights: np.ndarray, means_invvars: np.ndarray, inv_vars: np.ndarray
) -> np.ndarray:
    """Per-Gaussian constant term, as DiagGmm::ComputeGconsts (computed in double)."""
    inv_vars = inv_vars.astype(np.float64)
    means = means_invvars.astype(np.float64) / inv_vars
    dim = inv_vars.shape[1]
    with np.errstate(divide="ignore"):
        gc = (
            np.log(weights.astype(np.float64))
            - 0.5 * dim * np.log(2 * np.pi)
            + 0.5 * np.log(inv_vars).sum(axis=1)
            - 0.5 * (means * means * inv_vars).sum(axis=1)
        )
    return gc.astype(np.float32)


def write_am_diag_gmm(writer: KaldiWriter, am: AmDiagGmmParams) -> None:
    """Append the AmDiagGmm exactly as AmDiagGmm::Write does."""
    writer.write_token("<DIMENSION>")
    writer.write_int32(am.dim)
    writer.write_token("<NUMPDFS>")
    writer.write_int32(am.num_pdfs)
    for gmm in am.pdfs:
        writer.write_token("<DiagGMM>")
        writer.text_newline()
        writer.write_token("<GCONSTS>")
        writer.write_float_vector(gmm.gconsts)
        writer.write_token("<WEIGHTS>")
        writer.write_float_vector(gmm.weights)
        writer.write_token("<MEANS_INVVARS>")
        writer.write_float_matrix(gmm.means_invvars)
        writer.write_token("<INV_VARS>")
        writer.write_float_matrix(gmm.inv_vars)
        writer.write_token("</DiagGMM>")
        writer.text_newline()


def am_params_from_khg(am: khg.AmDiagGmm) -> AmDiagGmmParams:
    """Copy a khg AmDiagGmm's parameters out (gconsts computed, as Kaldi requires to write)."""
    import kaldi_hmm_gmm as khg

    pdfs = []
    for pdf in range(am.num_pdfs):
        gmm = khg.DiagGmm(am.get_pdf(pdf))
        gmm.compute_gconsts()
        pdfs.append(
            DiagGmmParams(
                gconsts=np.array(gmm.gconsts, dtype=np.float32),
                weights=np.array(gmm.weights, dtype=np.float32),
                means_invvars=np.array(gmm.means_invvars, dtype=np.float32),
                inv_vars=np.array(gmm.inv_vars, dtype=np.float32),
            )
        )
    return AmDiagGmmParams(dim=am.dim, pdfs=pdfs)


def to_khg_am_diag_gmm(params: AmDiagGmmParams) -> khg.AmDiagGmm:
    """Build a ``kaldi_hmm_gmm.AmDiagGmm`` (for decoding or further training)."""
    import kaldi_hmm_gmm as khg

    am = khg.AmDiagGmm()
    for p in params.pdfs:
        gmm = khg.DiagGmm(p.weights.shape[0], params.dim)
        gmm.set_weights(p.weights.astype(np.float32))
        gmm.set_invvars_and_means(p.inv_vars.astype(np.float32), p.means.astype(np.float32))
        gmm.compute_gconsts()
        am.add_pdf(gmm)
    am.compute_gconsts()
    return am
