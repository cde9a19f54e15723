"""Monophone model creation (gmm-init-mono) and transition-model reconstruction.

khg's TransitionModel has no setter for its probabilities: a model with given probabilities
is rebuilt from tree + topology and one MLE update on counts proportional to them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import kaldi_hmm_gmm as khg
import numpy as np

from asrdist.errors import AsrdistError


@dataclass
class MonoModel:
    """Tree (monophone context dependency), transition model and GMMs."""

    topo: khg.HmmTopology
    tree: khg.ContextDependency
    trans_model: khg.TransitionModel
    am: khg.AmDiagGmm


def monophone_tree(topo: khg.HmmTopology, phone_sets: list[list[int]]) -> khg.ContextDependency:
    """One tree root per phone set (sets.int), as gmm-init-mono --shared-phones."""
    covered = sorted(p for s in phone_sets for p in s)
    if covered != sorted(topo.phones):
        raise AsrdistError("phones/sets.int does not cover exactly the phones of the topology")
    return khg.monophone_context_dependency_shared(
        phone_classes=phone_sets, phone2num_pdf_classes=topo.get_phone_to_num_pdf_classes()
    )


def init_mono(
    topo: khg.HmmTopology, phone_sets: list[list[int]], feats: Iterable[np.ndarray]
) -> MonoModel:
    """Every pdf one Gaussian with the global mean and variance of ``feats`` (gmm-init-mono)."""
    count, s1, s2 = 0, 0.0, 0.0
    for m in feats:
        m = m.astype(np.float64)
        count += m.shape[0]
        s1 = s1 + m.sum(axis=0)
        s2 = s2 + (m * m).sum(axis=0)
    if count == 0:
        raise AsrdistError("no feature frames to initialise the monophone GMMs")
    mean = s1 / count
    var = s2 / count - mean * mean
    if var.min() <= 0.0:
        raise AsrdistError("features have zero variance in some dimension; cannot init GMMs")
    gmm = khg.DiagGmm(nmix=1, dim=mean.shape[0])
    gmm.set_weights(np.ones(1, dtype=np.float32))
    gmm.set_invvars_and_means(
        (1.0 / var).astype(np.float32)[None, :], mean.astype(np.float32)[None, :]
    )
    gmm.compute_gconsts()
    tree = monophone_tree(topo, phone_sets)
    am = khg.AmDiagGmm()
    for _ in range(tree.num_pdfs):
        am.add_pdf(gmm)
    am.compute_gconsts()
    return MonoModel(topo, tree, khg.TransitionModel(ctx_dep=tree, hmm_topo=topo), am)


def transition_model_with_log_probs(
    tree: khg.ContextDependency, topo: khg.HmmTopology, log_probs: np.ndarray
) -> khg.TransitionModel:
    """A TransitionModel whose probabilities are exp(``log_probs``) (indexed by transition-id).

    For decoding with a trained final.mdl: one MLE update on counts 1e6 * prob with a
    negligible floor reproduces the probabilities (renormalised per transition state).
    """
    tm = khg.TransitionModel(ctx_dep=tree, hmm_topo=topo)
    log_probs = np.asarray(log_probs, dtype=np.float64)
    if log_probs.shape[0] != tm.num_transition_ids + 1:
        raise AsrdistError(
            f"transition model has {tm.num_transition_ids} transition-ids, "
            f"got {log_probs.shape[0] - 1} log-probabilities"
        )
    counts = 1e6 * np.exp(log_probs)
    counts[0] = 0.0
    tm.mle_update(counts, khg.MleTransitionUpdateConfig(floor=1e-20, mincount=0.0))
    return tm
