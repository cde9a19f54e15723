"""Monophone model creation (gmm-init-mono), reading a trained one, transition-model
reconstruction.

khg's TransitionModel has no setter for its probabilities: a model with given probabilities
is rebuilt from tree + topology and one MLE update on counts proportional to them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import kaldi_hmm_gmm as khg
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.kaldi.am_gmm import to_khg_am_diag_gmm
from asrdist.kaldi.io_funcs import KaldiWriter
from asrdist.kaldi.transition_model import (
    TransitionInfo,
    read_final_mdl,
    transition_info_from_khg,
    write_topology,
)


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


def read_tree(path: str | os.PathLike) -> khg.ContextDependency:
    """A Kaldi binary ``tree`` file (ContextDependency::Write) as a khg ContextDependency."""
    path = Path(path)
    data = path.read_bytes()
    if not data.startswith(b"\0B"):
        raise AsrdistError(f"{path}: not a binary Kaldi tree (text trees are not supported)")
    tree = khg.ContextDependency.__new__(khg.ContextDependency)
    try:
        tree.__setstate__((np.frombuffer(data[2:], dtype=np.int8).tolist(),))
    except RuntimeError as e:
        raise AsrdistError(f"{path}: cannot read the tree ({e})") from e
    return tree


def khg_topology(info: TransitionInfo) -> khg.HmmTopology:
    """The model's own HmmTopology as a khg object (through Kaldi's text form)."""
    writer = KaldiWriter(binary=False, header=False)
    write_topology(writer, info.topology)
    topo = khg.HmmTopology()
    topo.read(writer.getvalue().decode())
    return topo


def khg_transition_model(
    info: TransitionInfo, tree: khg.ContextDependency, model_path: str | os.PathLike
) -> khg.TransitionModel:
    """Rebuild the model's TransitionModel in khg from its tree; refuse a tree that differs."""
    topo = khg_topology(info)
    try:
        tuples = transition_info_from_khg(khg.TransitionModel(tree, topo)).tuples
    except RuntimeError as e:
        raise AsrdistError(f"{model_path}: the tree does not fit the model's topology ({e})") from e
    if [tuple(t) for t in tuples] != [tuple(t) for t in info.tuples]:
        raise AsrdistError(
            f"{model_path}: the tree does not produce this model's transition states "
            "(pass the model's own tree with --tree)"
        )
    return transition_model_with_log_probs(tree, topo, info.log_probs)


def load_mono(model: str | os.PathLike, tree_path: str | os.PathLike) -> MonoModel:
    """A trained ``final.mdl`` and its ``tree`` as khg objects, ready to align with."""
    info, params = read_final_mdl(model)
    if params is None:
        raise AsrdistError(f"{model}: no GMMs in this model (a transition model only?)")
    tree = read_tree(tree_path)
    return MonoModel(khg_topology(info), tree, khg_transition_model(info, tree, model),
                     to_khg_am_diag_gmm(params))
