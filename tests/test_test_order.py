"""tests/conftest.py's order for parallel workers: each worker's share starts with heavy tests."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from tests.conftest import deal_heavy_tests


@dataclass
class FakeItem:
    name: str
    module_name: str
    seconds: float = 0.0

    @property
    def module(self) -> SimpleNamespace:
        return SimpleNamespace(__name__=self.module_name)

    def get_closest_marker(self, name: str):
        return pytest.mark.heavy(self.seconds).mark if name == "heavy" and self.seconds else None


def shares(items: list, workers: int) -> list[list[str]]:
    """The contiguous shares pytest-xdist's work stealing hands out first."""
    out, left = [], list(items)
    for w in range(workers):
        size = len(left) // (workers - w)
        out.append([i.name for i in left[:size]])
        left = left[size:]
    return out


def test_each_share_starts_with_its_heavy_modules_largest_first_to_the_least_loaded():
    light = [FakeItem(f"x{i}", "light") for i in range(10)]
    heavy = [FakeItem("mini1", "mini", 260), FakeItem("mini2", "mini", 40),
             FakeItem("swbd1", "swbd", 80), FakeItem("swbd2", "swbd", 80),
             FakeItem("swbd3", "swbd", 80), FakeItem("lj", "lj", 180), FakeItem("gpu", "gpu", 90)]
    items = light[:4] + heavy[:2] + light[4:] + heavy[2:]
    ordered = deal_heavy_tests(items, 2)
    assert sorted(i.name for i in ordered) == sorted(i.name for i in items)  # none lost
    first, second = shares(ordered, 2)
    # mini 300 -> share 0, swbd 240 -> 1, lj 180 -> 1 (240 < 300), gpu 90 -> 0 (300 < 420)
    assert first[:3] == ["mini1", "mini2", "gpu"] and second[:4] == ["swbd1", "swbd2", "swbd3",
                                                                      "lj"]
    assert [n for n in first + second if n.startswith("x")] == [f"x{i}" for i in range(10)]


def test_without_heavy_tests_the_order_is_the_collection_s():
    items = [FakeItem(f"x{i}", "light") for i in range(7)]
    assert deal_heavy_tests(items, 3) == items
