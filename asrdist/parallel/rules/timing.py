"""Where a learner's time goes, for metrics.jsonl: computing, blocked on communication, slept
by ``--slow-learner``; and how stale the gradients it applied were."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class StepTimes:
    """Seconds per phase and staleness since the last :meth:`report`.

    fwd_bwd_s: seconds from ``before_step`` to ``after_backward`` (the gradient, including any
    injected slow-down); comm_wait_s: seconds blocked on communication in the hooks;
    slowdown_s: seconds slept by ``--slow-learner``; staleness: see the strategy.
    """

    def __init__(self) -> None:
        self._sums = {"fwd_bwd_s": 0.0, "comm_wait_s": 0.0, "slowdown_s": 0.0}
        self._staleness: list[int] = []
        self._t_compute: float | None = None

    def begin_compute(self) -> None:
        self._t_compute = time.perf_counter()

    def end_compute(self, slept_s: float) -> None:
        """End the compute phase begun last, of which ``slept_s`` was injected slow-down."""
        self._sums["slowdown_s"] += slept_s
        if self._t_compute is not None:
            self._sums["fwd_bwd_s"] += time.perf_counter() - self._t_compute
            self._t_compute = None

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Count the time in the block as blocked on communication."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._sums["comm_wait_s"] += time.perf_counter() - t0

    def staleness(self, value: int) -> None:
        self._staleness.append(value)

    def report(self) -> dict[str, Any]:
        """The figures since the previous report (then start again from zero)."""
        out: dict[str, Any] = {k: round(v, 6) for k, v in self._sums.items()}
        self._sums = dict.fromkeys(self._sums, 0.0)
        if self._staleness:
            out["staleness"] = sum(self._staleness) / len(self._staleness)
            out["staleness_max"] = max(self._staleness)
            self._staleness = []
        return out
