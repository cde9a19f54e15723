"""The prefetcher keeps order and hands back what it made but was not taken."""

from __future__ import annotations

import itertools

import pytest

from asrdist.train.prefetch import Prefetcher


def test_order_and_pending_items_survive_a_restart():
    source = itertools.count()
    p = Prefetcher(lambda: next(source), count=10)
    assert [p.get() for _ in range(4)] == [0, 1, 2, 3]
    pending = p.pending()
    assert pending == [4]
    p.close()
    q = Prefetcher(lambda: next(source), count=5, ready=pending)
    assert [q.get() for _ in range(6)] == [4, 5, 6, 7, 8, 9]
    q.close()


def test_producer_errors_reach_the_consumer():
    def fail():
        raise ValueError("bad utterance")

    p = Prefetcher(fail, count=1)
    with pytest.raises(ValueError, match="bad utterance"):
        p.get()
    p.close()


def test_inline_mode_makes_the_same_sequence():
    source = itertools.count()
    p = Prefetcher(lambda: next(source), count=3, ready=[-1], background=False)
    assert [p.get() for _ in range(4)] == [-1, 0, 1, 2]
    assert p.pending() == []
    p.close()
