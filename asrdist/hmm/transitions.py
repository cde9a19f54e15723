"""A ``final.mdl``'s topology and TransitionModel as kaldi-hmm-gmm objects.

khg's TransitionModel has no setter for its probabilities: a model with given probabilities
is rebuilt from tree + topology and one MLE update on counts proportional to them.
"""

from __future__ import annotations

import os

import kaldi_hmm_gmm as khg  # before kaldifst, or the process hangs
import numpy as np

from asrdist.errors import AsrdistError
from asrdist.kaldi.io_funcs import KaldiWriter
from asrdist.kaldi.transition_model import (
    TransitionInfo,
    transition_info_from_khg,
    write_topology,
)


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
