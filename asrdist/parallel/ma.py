"""ma: periodic model averaging (Su & Chen 2015; Kaldi nnet3's parallel training).

Each learner takes ``avg_period`` (K) local steps, then all learners replace their weights by
the average (one allreduce, torch's ``model_averaging.utils.average_parameters``). Optimizer
state (momentum) stays local. Averaging is keyed on the learner's own step count, which
:meth:`state_dict` saves, so a resumed run averages at the same steps.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.algorithms.model_averaging.utils import average_parameters

from asrdist.errors import AsrdistError
from asrdist.parallel.base import DistributedStrategy, unwrap


class ModelAveraging(DistributedStrategy):
    name = "ma"

    def __init__(self, avg_period: int = 8, **options: Any) -> None:
        if avg_period < 1:
            raise AsrdistError(f"--avg-period {avg_period}: must be >= 1")
        super().__init__(**options)
        self.avg_period = avg_period
        self.steps = 0
        self.averages = 0

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        self._start_distance(model)
        return model

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        if self.multi:
            self._begin_compute()

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        if self.multi:
            self._end_compute()

    def after_step(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                   step: int) -> None:
        self.steps += 1
        if self.multi and self.steps % self.avg_period == 0:
            with self._waiting():
                average_parameters(iter(list(unwrap(model).parameters())), None)
            self.averages += 1

    def metrics(self) -> dict[str, Any]:
        out = super().metrics()
        out["averages"] = self.averages
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "averages": self.averages}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = int(state.get("steps", 0))
        self.averages = int(state.get("averages", 0))
