"""Kaldi's text forms that the comparisons with Kaldi's own programs read."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asrdist.gmm.tree_stats import TreeStats


def read_text_tree_stats(path: Path) -> TreeStats:
    """Kaldi's text BuildTreeStats of GaussClusterables (acc-tree-stats --binary=false)."""
    tokens = path.read_text().replace("[", " ").replace("]", " ").split()
    assert tokens[0] == "BTS"
    pos, events, dim = 2, {}, 0
    for _ in range(int(tokens[1])):
        assert tokens[pos] == "EV"
        n = int(tokens[pos + 1])
        pairs = [int(t) for t in tokens[pos + 2:pos + 2 + 2 * n]]
        pos += 2 + 2 * n
        assert tokens[pos:pos + 2] == ["T", "GCL"]
        count = float(tokens[pos + 2])
        pos += 4  # count, variance floor
        dim = dim or _row_dim(tokens, pos)
        stats = np.array([float(t) for t in tokens[pos:pos + 2 * dim]])
        pos += 2 * dim
        events[tuple(zip(pairs[::2], pairs[1::2], strict=True))] = np.concatenate(
            [[count], stats])
    return TreeStats(events, dim)


def _row_dim(tokens: list[str], pos: int) -> int:
    """The statistics' dimension: numbers up to the next event."""
    end = tokens.index("EV", pos) if "EV" in tokens[pos:] else len(tokens)
    return (end - pos) // 2
