"""Slow-learner injection (``--slow-learner RANK:FACTOR``) for straggler studies.

The chosen learner sleeps, after each gradient computation, for (FACTOR - 1) times the time that
computation took, so its compute phase is FACTOR times longer whatever the model or machine.
Only the computing thread sleeps: its communication thread keeps serving exchanges, as a slow
GPU would.
"""

from __future__ import annotations

import time

from asrdist.errors import AsrdistError


def parse_slow_learner(spec: str | None) -> tuple[int, float] | None:
    """``"RANK:FACTOR"`` -> (rank, factor); None or "" -> None."""
    if not spec:
        return None
    try:
        rank_s, factor_s = spec.split(":")
        rank, factor = int(rank_s), float(factor_s)
    except ValueError:
        raise AsrdistError(f"--slow-learner {spec!r}: expected RANK:FACTOR, e.g. 1:3") from None
    if rank < 0 or factor < 1.0:
        raise AsrdistError(f"--slow-learner {spec!r}: need RANK >= 0 and FACTOR >= 1")
    return rank, factor


class SlowDown:
    """Stretches one learner's compute phase by ``factor``; a no-op for factor 1."""

    def __init__(self, factor: float = 1.0) -> None:
        self.factor = factor
        self._t0: float | None = None

    @classmethod
    def of_learner(cls, spec: str | None, rank: int) -> SlowDown:
        """Learner ``rank``'s slow-down under ``--slow-learner spec`` (factor 1 if not named)."""
        slow = parse_slow_learner(spec)
        return cls(slow[1] if slow and slow[0] == rank else 1.0)

    def start(self) -> None:
        """Mark the start of a compute phase."""
        self._t0 = time.perf_counter()

    def stop(self) -> float:
        """End the compute phase, sleeping as needed; returns the seconds slept."""
        if self._t0 is None or self.factor <= 1.0:
            return 0.0
        extra = (self.factor - 1.0) * (time.perf_counter() - self._t0)
        self._t0 = None
        time.sleep(extra)
        return extra
