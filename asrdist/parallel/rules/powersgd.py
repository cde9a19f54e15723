"""Keep torch's PowerSGD state in the layout of the bucket it is used with, so a resumed run
continues exactly.

PowerSGD (``torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook``) keeps per bucket a
flat error-feedback vector over the bucket's gradients and flat P and Q factors of the
tensors it compresses, all in the order of the bucket's tensors. DDP lays its first step's
buckets out in parameter order and rebuilds them after that step in the order the gradients
became ready (for a ``Sequential``, reversed): a run's state is in the rebuilt order, but a
process that resumes it starts with the first layout again, for one step. :class:`Layouts`
sees each bucket's layout at every call of the hook and, where it changed, permutes that
bucket's state to it (the same tensors in another order; a bucket whose tensors changed is
left alone: see the README).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

Layout = tuple[int, ...]  # the bucket's tensors, as indices of the model's parameters


class Layouts:
    """The layout each bucket's PowerSGD state is in, for the parameters ``params``."""

    def __init__(self, params: Iterable[torch.nn.Parameter]) -> None:
        params = list(params)
        self._index = {id(p): i for i, p in enumerate(params)}
        self._shapes = [tuple(p.shape) for p in params]
        self.of_state: dict[int, Layout] = {}

    def follow(self, state: Any, bucket: Any) -> None:
        """Before PowerSGD's hook runs on ``bucket``: put ``state``'s entries for it in the
        bucket's layout."""
        index = bucket.index()
        now = tuple(self._index[id(p)] for p in bucket.parameters())
        was = self.of_state.get(index)
        if was is not None and was != now and sorted(was) == sorted(now):
            self._permute(state, index, was, now)
        self.of_state[index] = now

    def _permute(self, state: Any, bucket: int, was: Layout, now: Layout) -> None:
        if bucket in state.error_dict:
            sizes = {i: math.prod(self._shapes[i]) for i in was}
            state.error_dict[bucket] = _reorder(state.error_dict[bucket], was, now, sizes)
        if bucket in state.p_memory_dict:
            rank = state.matrix_approximation_rank
            p_sizes, q_sizes = {}, {}
            for i in was:
                n, m = self._matrix(i)
                r = min(n, m, rank)
                p_sizes[i], q_sizes[i] = n * r, m * r
            order_was = self._factor_order(was, rank, state.min_compression_rate)
            order_now = self._factor_order(now, rank, state.min_compression_rate)
            state.p_memory_dict[bucket] = _reorder(state.p_memory_dict[bucket], order_was,
                                                   order_now, p_sizes)
            state.q_memory_dict[bucket] = _reorder(state.q_memory_dict[bucket], order_was,
                                                   order_now, q_sizes)

    def _matrix(self, i: int) -> tuple[int, int]:
        """The (rows, columns) PowerSGD views parameter ``i``'s gradient as."""
        shape = self._shapes[i]
        rows = shape[0] if shape else 1
        return rows, math.prod(shape) // rows

    def _factor_order(self, layout: Layout, rank: int, min_rate: float) -> Layout:
        """The order of the compressed tensors' factors in P and Q: grouped by shape, groups in
        order of first appearance, as the hook lays them out."""
        groups: dict[tuple[int, int], list[int]] = {}
        for i in layout:
            n, m = self._matrix(i)
            r = min(n, m, rank)
            if (n + m) * r * min_rate < n * m:  # torch's _should_compress
                groups.setdefault((n, m), []).append(i)
        return tuple(i for members in groups.values() for i in members)

    def state_dict(self) -> dict[int, list[int]]:
        return {b: list(layout) for b, layout in self.of_state.items()}

    def load_state_dict(self, state: dict[int, list[int]]) -> None:
        self.of_state = {int(b): tuple(layout) for b, layout in state.items()}


def _reorder(flat: torch.Tensor, was: Layout, now: Layout,
             sizes: dict[int, int]) -> torch.Tensor:
    """``flat``, the pieces of ``was`` (each ``sizes[i]`` long) one after another, with the
    pieces in the order ``now``."""
    pieces = dict(zip(was, flat.split([sizes[i] for i in was]), strict=True))
    return torch.cat([pieces[i] for i in now]) if now else flat
