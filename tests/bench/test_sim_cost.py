"""bench.sim_cost at a tiny size: the first steps timed apart from the later ones, and the
table's columns."""

from __future__ import annotations

from bench import sim_cost


def test_the_first_steps_are_timed_apart_and_tabled():
    rows = [sim_cost.one("ssgd", n, 3, batch=4, layers=1, units=8, together=0, device="cpu",
                         warmup=1) for n in (1, 2)]
    for r in rows:
        assert r["s_per_step"] > 0 and r["first_s_per_step"] > 0
    lines = sim_cost.table(rows)
    assert "first steps: s / step" in lines[0]
    assert all(line.count("|") == 10 for line in lines)
    assert lines[3].startswith("| ssgd | 2 | one at a time |")


def test_one_step_is_timed_whole():
    """With one step nothing is left out: the warm-up cannot take the only step."""
    r = sim_cost.one("ssgd", 1, 1, batch=4, layers=1, units=8, together=0, device="cpu",
                     warmup=1)
    assert r["s_per_step"] == r["first_s_per_step"] > 0
