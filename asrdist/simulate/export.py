"""A simulated run's exported average as ``final.pt``, so it can be decoded like a trained one.

The simulator keeps only flat weights (:attr:`asrdist.simulate.run.Result.final`); this puts
them back into the run's model and writes what asrdist-train's export writes: the model config,
input dimension, pdf count, log priors from the alignments' pdf counts (all of them, as the
trainer's), the features' CMVN and configuration, the training chunk and the model's context
(none: the chunk pool holds labelled frames only).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from asrdist.errors import AsrdistError
from asrdist.models.build import build_model
from asrdist.models.final import Exported, write_final
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec
from asrdist.simulate.run import Result
from asrdist.train.priors import log_priors


def export_final(path: str | os.PathLike, pool: ChunkPool, spec: RunSpec, result: Result
                 ) -> Path:
    """Write ``result``'s exported average (a run of ``spec`` on ``pool``) to ``path``."""
    if pool.pdf_counts is None:
        raise AsrdistError(f"{path}: the chunk pool has no pdf counts (load it with "
                           "ChunkPool.load) to compute the priors from")
    model = build_model(spec.model, pool.input_dim, pool.num_pdfs)
    params = list(model.parameters())
    size = sum(p.numel() for p in params)
    if result.final.numel() != size:
        raise AsrdistError(f"{path}: the run's final weights have {result.final.numel()} "
                           f"values, its model {size}")
    torch.nn.utils.vector_to_parameters(result.final, params)
    steps = round(result.records[-1]["steps"]) if result.records else 0
    return write_final(path, model, Exported(
        model_config=spec.model, input_dim=pool.input_dim, num_pdfs=pool.num_pdfs,
        log_priors=log_priors(pool.pdf_counts), cmvn=pool.cmvn, cmvn_norm_vars=False,
        left_context=model.left_context, right_context=model.right_context,
        chunk_len=pool.chunk_len, steps=steps, algo=spec.algo, world_size=spec.learners,
        feats_layout=pool.feats_layout, feats_config=pool.feats_config))
