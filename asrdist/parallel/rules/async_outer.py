"""diloco-async's outer state and its update (:class:`AsyncOuter`), apart from the strategy
(:mod:`asrdist.parallel.strategies.async_diloco`, whose docstring gives the maths) so that the
process that serves it in elastic runs (:mod:`asrdist.parallel.processes.outer_server`) needs
nothing of the strategies or the transports."""

from __future__ import annotations

import threading
from typing import Any

import torch

from asrdist.errors import AsrdistError


class AsyncOuter:
    """The server's state and its update (see the module docstring): ``weights`` is w_g."""

    def __init__(self, start: torch.Tensor, learners: int, period: int, lr: float = 0.7,
                 momentum: float = 0.9, buffer: int = 0, activation: float = 0.0,
                 follow_speed: bool = False, quorum: int = 0) -> None:
        self._options = {"learners": learners, "period": period, "lr": lr,
                         "momentum": momentum, "buffer": buffer, "activation": activation,
                         "follow_speed": follow_speed, "quorum": quorum}
        self.weights = start.detach().clone()
        self.numel = self.weights.numel()
        self.learners, self.period = learners, period
        self.lr, self.momentum = lr, momentum
        self.buffer = buffer or learners  # N
        if not 0.0 <= activation <= 1.0 / self.buffer:
            raise AsrdistError(f"--async-activation {activation:g}: must be in [0, 1/N] = "
                               f"[0, {1.0 / self.buffer:g}] (N = --async-buffer)")
        self.activation = activation  # c
        self.follow_speed = follow_speed
        self.quorum = quorum  # 0: every push is applied by delayed Nesterov
        if quorum and (buffer or activation):
            raise AsrdistError("--async-quorum: it replaces delayed Nesterov, so it takes no "
                               "--async-buffer or --async-activation")
        self.held = torch.zeros_like(self.weights)  # quorum: sum of steps * g held so far
        self.held_steps = self.held_count = 0
        self.b = torch.zeros_like(self.weights)  # momentum buffer
        self.d = torch.zeros_like(self.weights)  # pushes since the last momentum update
        self.t = 0  # pushes applied
        self.pulled_t = [0] * learners  # t at each learner's last pull
        self.seconds_per_step: dict[int, float] = {}
        self._lock = threading.Lock()

    def options(self) -> dict[str, Any]:
        """The arguments it was made with but ``start``: another process makes the same
        state from them (the elastic run's server,
        :mod:`asrdist.parallel.processes.outer_server`)."""
        return dict(self._options)

    def push(self, rank: int, pseudo_grad: torch.Tensor, steps: int,
             seconds: float) -> tuple[torch.Tensor, int, int]:
        """Apply learner ``rank``'s pseudo-gradient; returns the global weights after it (a
        fresh tensor), its next block's steps and its staleness."""
        with self._lock, torch.no_grad():
            g = pseudo_grad.to(self.weights.device, self.weights.dtype)
            stale = self.t - self.pulled_t[rank]
            self.t += 1
            if self.quorum:
                self._hold(g, steps)
            else:
                self._delayed_nesterov(g)
            self.pulled_t[rank] = self.t
            if steps > 0 and seconds > 0:
                self.seconds_per_step[rank] = seconds / steps
            return self.weights.clone(), self.next_steps(rank), stale

    def _delayed_nesterov(self, g: torch.Tensor) -> None:
        n, c, mu = self.buffer, self.activation, self.momentum
        self.d.add_(g)
        if self.t % n == 0:
            self.b.mul_(mu).add_(self.d, alpha=1.0 / n)
            self.d.zero_()
            step = self.b * ((1.0 - c * n + c) * mu)
        else:
            step = self.b * (c * mu)
        step.add_(g, alpha=1.0 / n)
        self.weights.sub_(step, alpha=self.lr)

    def _hold(self, g: torch.Tensor, steps: int) -> None:
        """Quorum: hold ``g`` (weighted by its steps) until Q pushes are held, then take
        diloco's outer Nesterov step on their weighted mean."""
        self.held.add_(g, alpha=float(steps))
        self.held_steps += steps
        self.held_count += 1
        if self.held_count < self.quorum:
            return
        merged = self.held / max(self.held_steps, 1)
        self.b.mul_(self.momentum).add_(merged)
        self.weights.sub_(merged + self.momentum * self.b, alpha=self.lr)
        self.held.zero_()
        self.held_steps = self.held_count = 0

    def next_steps(self, rank: int) -> int:
        """Learner ``rank``'s next block: H, or with speed following H times the fastest
        learner's seconds per step over its own (at least 1)."""
        mine = self.seconds_per_step.get(rank)
        if not self.follow_speed or not mine:
            return self.period
        fastest = min(self.seconds_per_step.values())
        return max(1, round(self.period * fastest / mine))

    def state_dict(self) -> dict[str, Any]:
        with self._lock:
            return {"weights": self.weights.clone(), "b": self.b.clone(), "d": self.d.clone(),
                    "t": self.t, "pulled_t": list(self.pulled_t),
                    "seconds_per_step": dict(self.seconds_per_step),
                    "held": self.held.clone(), "held_steps": self.held_steps,
                    "held_count": self.held_count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with self._lock:
            device = self.weights.device
            self.weights = state["weights"].to(device)
            self.b, self.d = state["b"].to(device), state["d"].to(device)
            self.t = int(state["t"])
            self.pulled_t = list(state["pulled_t"])
            self.seconds_per_step = dict(state["seconds_per_step"])
            self.held = state["held"].to(device)
            self.held_steps, self.held_count = int(state["held_steps"]), int(state["held_count"])
