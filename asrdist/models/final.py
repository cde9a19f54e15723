"""``final.pt``, the exported model: written by the trainer, read by decoding and alignment.

Both ends of the format live here so they cannot drift. On disk it is one torch-saved dict:
``format``, the weights under ``model``, and the fields of :class:`Exported` (the model config
as a dict, the log priors as a tensor), so a user can still ``torch.load`` it and look.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from asrdist.errors import AsrdistError
from asrdist.fsutil import write_atomically
from asrdist.kaldi.layout import Layout, layout_from_record, layout_record
from asrdist.models.build import ModelConfig, build_model

FILENAME = "final.pt"
FORMAT = "asrdist-final-1"


@dataclass(frozen=True)
class Exported:
    """Everything decoding needs besides the weights, and how the model was trained."""

    model_config: ModelConfig
    input_dim: int
    num_pdfs: int
    log_priors: np.ndarray  # (num_pdfs,) float32: log of the pdfs' training frequencies
    cmvn: str = "none"  # the features' normalisation: none, utt or spk
    cmvn_norm_vars: bool = False
    left_context: int = 0  # input frames the model reads either side of a chunk
    right_context: int = 0
    chunk_len: int = 0  # training chunk length: decoding's default window (0: whole utterances)
    steps: int = 0
    algo: str = "single"
    world_size: int = 1
    # an elastic run's learners dropped on the way, each {"rank": R, "step": S} (the step it
    # left at): world_size is the learners started, not those averaged
    learners_lost: list[dict[str, int]] = field(default_factory=list)
    # joined features' column ranges and their normalisation (stored as plain dicts); None:
    # ``cmvn`` applies to every column, as in files from before layouts
    feats_layout: Layout | None = None
    # what made the training features (their feats_config.json, asrdist.kaldi.feats_config), for
    # decoding to refuse others; None: not recorded (older files, features from elsewhere)
    feats_config: dict[str, Any] | None = None


def write_final(path: str | os.PathLike, model: nn.Module, exported: Exported) -> Path:
    """Write ``model``'s weights (as CPU tensors) and ``exported`` to ``path`` atomically."""
    record: dict[str, Any] = {
        "format": FORMAT,
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        **{f.name: getattr(exported, f.name) for f in dataclasses.fields(Exported)},
        "model_config": exported.model_config.to_dict(),
        "log_priors": torch.as_tensor(np.asarray(exported.log_priors, dtype=np.float32)),
        "feats_layout": layout_record(exported.feats_layout),
    }
    write_atomically(path, lambda f: torch.save(record, f), "final model")
    return Path(path)


def load_final(path: str | os.PathLike, map_location: str = "cpu"
               ) -> tuple[nn.Module, Exported]:
    """Rebuild the exported model from ``path``: the model (eval mode) and what came with it."""
    try:
        record = torch.load(path, map_location=map_location, weights_only=True)  # data only
        known = {f.name for f in dataclasses.fields(Exported)}
        exported = Exported(**{
            **{k: v for k, v in record.items() if k in known},
            "model_config": ModelConfig(**record["model_config"]),
            "log_priors": np.asarray(record["log_priors"], dtype=np.float32),
            "feats_layout": layout_from_record(record.get("feats_layout"), "feats_layout"),
        })
        model = build_model(exported.model_config, exported.input_dim, exported.num_pdfs)
        model.load_state_dict(record["model"])
    except Exception as e:  # noqa: BLE001 - a missing file, another pickle, a checkpoint
        raise AsrdistError(f"{path}: not a readable asrdist {FILENAME} "
                           f"({type(e).__name__}: {str(e)[:120]})") from e
    model.eval()
    return model, exported
