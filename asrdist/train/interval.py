"""Running sums between two metrics records, kept so that training never waits on the device.

Reading a loss (``loss.item()``) makes the host wait for the GPU; the sums here stay tensors on
the device and are read only when a record or a checkpoint is written. The first non-finite
loss is remembered on the device too (its step and value), so the error names the exact step.
A checkpoint holds the interval: a resumed run writes the records the uninterrupted one would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Interval:
    """Sums since the last metrics record."""

    loss_sum: torch.Tensor  # sum of loss x labelled frames, float64, on the device
    first_bad: torch.Tensor  # [step, loss] of the first non-finite loss; step -1 if none
    frames: int = 0
    steps: int = 0
    data_wait_s: float = 0.0
    compute_s: float = 0.0

    @classmethod
    def start(cls, device: torch.device) -> Interval:
        return cls(torch.zeros((), dtype=torch.float64, device=device),
                   torch.tensor([-1.0, 0.0], dtype=torch.float64, device=device))

    def add(self, loss: torch.Tensor, frames: int, step: int, data_wait_s: float,
            compute_s: float) -> None:
        """Count one step's (detached) loss; nothing here waits for the device."""
        value = loss.double()
        self.loss_sum += value * frames
        here = torch.stack((torch.full_like(value, step), value))
        new_bad = ~torch.isfinite(value) & (self.first_bad[0] < 0)
        self.first_bad = torch.where(new_bad, here, self.first_bad)
        self.frames += frames
        self.steps += 1
        self.data_wait_s += data_wait_s
        self.compute_s += compute_s

    def non_finite(self) -> tuple[int, float] | None:
        """(step, loss) of the first non-finite loss so far, or None (reads the device)."""
        step, value = self.first_bad.tolist()
        return None if step < 0 else (int(step), value)

    def mean_loss(self) -> float:
        """Loss per labelled frame over the interval (reads the device)."""
        return self.loss_sum.item() / max(self.frames, 1)

    def state_dict(self) -> dict[str, Any]:
        return {"loss_sum": self.loss_sum.cpu(), "first_bad": self.first_bad.cpu(),
                "frames": self.frames, "steps": self.steps, "data_wait_s": self.data_wait_s,
                "compute_s": self.compute_s}

    @classmethod
    def from_state(cls, state: dict[str, Any], device: torch.device) -> Interval:
        return cls(**{**state, "loss_sum": state["loss_sum"].to(device),
                      "first_bad": state["first_bad"].to(device)})
