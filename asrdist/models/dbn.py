"""A stack of RBMs (a DBN, ``dbn.pt``) and how it initialises the sigmoid DNN.

The first RBM was trained on spliced features normalised to zero mean and unit variance
(``mean``, ``std`` in the file); that normalisation is folded into the DNN's first affine
layer (W' = W / std, b' = c - W' mean), so the DNN takes the same inputs as without
pretraining. The softmax layer stays freshly initialised, as in Hinton's and Kaldi's recipes.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import torch

from asrdist.errors import AsrdistError
from asrdist.models.dnn import DNN

FORMAT = "asrdist-dbn-1"


def load_dbn(path: str | os.PathLike) -> dict[str, Any]:
    try:
        record = torch.load(path, map_location="cpu", weights_only=True)  # data, never code
    except pickle.UnpicklingError as e:
        raise AsrdistError(f"--init-dbn {path}: cannot read (holds objects other than tensors "
                           "and plain values: refused, loading it could run code)") from e
    except (OSError, RuntimeError) as e:
        raise AsrdistError(f"--init-dbn {path}: cannot read ({e})") from e
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise AsrdistError(f"--init-dbn {path}: not an asrdist-pretrain-rbm dbn.pt")
    return record


def init_dnn_from_dbn(model: DNN, record: dict[str, Any], path: str) -> int:
    """Copy the RBMs' weights and hidden biases into ``model``'s first hidden layers; returns
    how many layers were initialised (the DBN's depth, or the DNN's if that is smaller)."""
    if not any(isinstance(m, torch.nn.Sigmoid) for m in model.net):
        raise AsrdistError(f"--init-dbn {path}: RBMs initialise a sigmoid DNN; set "
                           "--activation sigmoid")
    if record["splice"] != model.left_context:
        raise AsrdistError(f"--init-dbn {path}: the DBN was trained with --splice "
                           f"{record['splice']}, the DNN has {model.left_context}")
    affine = model.hidden_affine()
    layers = record["layers"][:len(affine)]
    with torch.no_grad():
        for i, (linear, rbm) in enumerate(zip(affine, layers, strict=False)):
            weight, bias = rbm["weight"], rbm["hidden_bias"]
            if i == 0:
                weight = weight / record["std"]
                bias = bias - weight @ record["mean"]
            if weight.shape != linear.weight.shape:
                raise AsrdistError(
                    f"--init-dbn {path}: RBM {i + 1} is {tuple(weight.shape)} (hidden x "
                    f"visible), the DNN's layer {i + 1} is {tuple(linear.weight.shape)}: "
                    "match --hidden-units and the feature dimension")
            linear.weight.copy_(weight)
            linear.bias.copy_(bias)
    return len(layers)
