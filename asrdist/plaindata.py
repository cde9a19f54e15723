"""State as plain data: what ``torch.load(weights_only=True)`` reads back without running any
code from the file, so a checkpoint is data and a crafted one can execute nothing.

Plain data is ``None``, bools, ints, floats, strings, bytes, tensors, torch dtypes and devices,
in dicts, lists, tuples and sets; numpy values are not, so numpy RNG states and arrays are
turned into tensors here and back.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

# exact types: numpy's float64 is a float and a namedtuple a tuple, yet neither pickles as one
_PLAIN = {type(None), bool, int, float, str, bytes, torch.dtype, torch.device, dict,
          OrderedDict, list, tuple, set, frozenset}


def mt19937_to_plain(state: dict[str, Any]) -> dict[str, Any]:
    """A numpy MT19937 state (``RandomState.get_state(legacy=False)``) with its key as a
    tensor."""
    key = state["state"]["key"]
    return {**state, "state": {**state["state"], "key": torch.from_numpy(key.astype(np.int64))}}


def mt19937_from_plain(state: dict[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`mt19937_to_plain`, for ``RandomState.set_state``."""
    key = state["state"]["key"].numpy().astype(np.uint32)
    return {**state, "state": {**state["state"], "key": key}}


def to_tensor(array: np.ndarray | None) -> torch.Tensor | None:
    """A copy of ``array`` as a tensor of its dtype (None stays None)."""
    return None if array is None else torch.from_numpy(np.array(array, copy=True))


def to_array(tensor: torch.Tensor | None) -> np.ndarray | None:
    """The inverse of :func:`to_tensor`."""
    return None if tensor is None else tensor.numpy()


def _walk(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    yield where, value
    if type(value) in (dict, OrderedDict):
        for k, v in value.items():
            yield from _walk(k, f"{where}[{k!r}] (key)")
            yield from _walk(v, f"{where}[{k!r}]")
    elif type(value) in (list, tuple, set, frozenset):
        for i, v in enumerate(value):
            yield from _walk(v, f"{where}[{i}]")


def first_unplain(value: Any) -> str | None:
    """Where the first value that is not plain data sits in ``value`` (``state['rng']``, and
    its type), or None when all of it is plain."""
    for where, v in _walk(value, "state"):
        if type(v) not in _PLAIN and not isinstance(v, torch.Tensor):
            return f"{where}: {type(v).__module__}.{type(v).__qualname__}"
    return None
