"""The monophone GMM-HMM: created as gmm-init-mono does, or read back from a trained one."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import kaldi_hmm_gmm as khg
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.hmm.transitions import khg_topology, khg_transition_model
from asrdist.hmm.tree import monophone_tree, read_tree
from asrdist.kaldi.am_gmm import to_khg_am_diag_gmm
from asrdist.kaldi.final_mdl import read_final_mdl


@dataclass
class MonoModel:
    """Tree (monophone context dependency), transition model and GMMs."""

    topo: khg.HmmTopology
    tree: khg.ContextDependency
    trans_model: khg.TransitionModel
    am: khg.AmDiagGmm


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


def load_mono(model: str | os.PathLike, tree_path: str | os.PathLike) -> MonoModel:
    """A trained ``final.mdl`` and its ``tree`` as khg objects, ready to align with."""
    info, params = read_final_mdl(model)
    if params is None:
        raise AsrdistError(f"{model}: no GMMs in this model (a transition model only?)")
    tree = read_tree(tree_path)
    return MonoModel(khg_topology(info), tree, khg_transition_model(info, tree, model),
                     to_khg_am_diag_gmm(params))
