"""Mixed precision that is what it says: the dtype the LSTM really runs in, and a gradient
scaler whenever that dtype is fp16.

PyTorch's autocast wrapper for cuDNN's RNNs casts to fp16 whatever dtype autocast asks for
(``aten/src/ATen/cudnn/AutocastRNN.cpp``), unless the installed torch and cuDNN run LSTMs in
bf16 (cuDNN >= 9.13 with a torch that asks for it). So ``bf16`` is not taken on trust: a tiny
LSTM is run under bf16 autocast on the learner's device, and the dtype of its output is what
the LSTM runs in. Where that is fp16, bf16 falls back to fp16 autocast with a gradient scaler
(fp16's narrow exponent underflows small gradients without one), and the log says so.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import torch

from asrdist.errors import AsrdistError, first_line

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16", "fp16")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class Precision:
    """What a run computes in: ``requested`` is the option, ``autocast`` the dtype asked of
    autocast (None: fp32, no autocast), ``lstm`` the dtype the LSTM really runs in (None: the
    model has none), ``scaled`` whether gradients go through a :class:`torch.amp.GradScaler`."""

    requested: str
    device_type: str
    autocast: torch.dtype | None
    lstm: torch.dtype | None
    scaled: bool

    @property
    def name(self) -> str:
        """The precision actually used: fp32, bf16 or fp16."""
        return {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.autocast]

    @contextlib.contextmanager
    def autocast_context(self) -> Iterator[None]:
        """Forward and loss under autocast in :attr:`autocast` (nothing in fp32)."""
        if self.autocast is None:
            yield
            return
        with torch.autocast(self.device_type, dtype=self.autocast):
            yield

    def scaler(self) -> torch.amp.GradScaler | None:
        """A fresh gradient scaler when :attr:`scaled`, else None."""
        return torch.amp.GradScaler(self.device_type) if self.scaled else None

    def describe(self) -> dict[str, str | bool]:
        """For metrics.jsonl's start record."""
        return {"precision": self.name, "precision_requested": self.requested,
                "lstm_dtype": str(self.lstm).removeprefix("torch.") if self.lstm else "none",
                "loss_scaling": self.scaled}


@cache
def lstm_dtype_under_autocast(device_type: str, dtype: torch.dtype) -> torch.dtype:
    """The dtype a (tiny) LSTM's output has when run on ``device_type`` under ``dtype``
    autocast: the dtype the installed torch/cuDNN really run LSTMs in."""
    device = torch.device(device_type)
    with torch.random.fork_rng(devices=[]):  # draws nothing from the run's generators
        lstm = torch.nn.LSTM(4, 4, batch_first=True).to(device)
        x = torch.zeros(1, 2, 4, device=device)
    with torch.autocast(device_type, dtype=dtype):
        out, _ = lstm(x)
    return out.dtype


def choose_precision(requested: str, device: torch.device, lstm: bool = True) -> Precision:
    """The :class:`Precision` for option value ``requested`` on ``device`` for a model with an
    LSTM or not (see the module docstring: bf16 falls back to scaled fp16 where the LSTM would
    run in fp16 anyway)."""
    if requested not in PRECISIONS:
        raise AsrdistError(f"--precision {requested}: use one of {', '.join(PRECISIONS)}")
    kind = device.type
    if requested == "fp32":
        return Precision(requested, kind, None, torch.float32 if lstm else None, False)
    asked = _DTYPES[requested]
    if not lstm:
        return Precision(requested, kind, asked, None, asked == torch.float16)
    try:
        lstm = lstm_dtype_under_autocast(kind, asked)
    except RuntimeError as exc:  # this device cannot autocast to that dtype at all
        raise AsrdistError(f"--precision {requested}: not available on {device} "
                           f"({first_line(exc)})") from exc
    if requested == "bf16" and lstm == torch.float16:
        log.warning("--precision bf16: this torch/cuDNN runs the LSTM in fp16 under bf16 "
                    "autocast; training in fp16 with a gradient scaler instead")
        return Precision(requested, kind, torch.float16, torch.float16, True)
    return Precision(requested, kind, asked, lstm, asked == torch.float16)
