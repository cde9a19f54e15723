"""The comparison's table on runs made by hand: every figure computed here from the records."""

from __future__ import annotations

import math

import pytest

from asrdist.simulate import table


def _report(strategy: str, scenario: str, seed: int, points: list[tuple[float, float]],
            wire: tuple[float, float] = (0.0, 0.0)) -> dict:
    """A run of 2 learners with held-out CE ``ce`` at simulated time ``t`` for each (t, ce)."""
    return {"strategy": strategy, "scenario": scenario, "seed": seed,
            "records": [{"time_s": t, "heldout_ce": ce, "steps": k}
                        for k, (t, ce) in enumerate(points)],
            "summary": {"time_s": points[-1][0],
                        "wire_bytes": {"node": wire[0], "cross": wire[1]}},
            "spec": {"learners": 2}}


REPORTS = [
    _report("a", "none", 0, [(0, 3.0), (10, 2.0), (20, 1.5)], wire=(0, 4e6)),
    _report("b", "none", 0, [(0, 3.0), (5, 2.2), (10, 1.6)], wire=(2e6, 2e6)),
    _report("a", "none", 1, [(0, 3.2), (10, 2.1), (20, 1.7)], wire=(0, 4e6)),
    _report("b", "none", 1, [(0, 3.2), (5, 2.0), (10, 1.6)], wire=(2e6, 2e6)),
    _report("b", "slow", 0, [(0, 3.0), (15, 2.5), (30, 9.0)]),  # diverged: 9 > 2 x 2.5
]


def test_per_run_figures():
    runs = table.run_rows(REPORTS, "a", target=2.05, budgets=[6, 20])
    first_b = runs[1]
    assert first_b["final_ce"] == 1.6 and first_b["diff_ce"] == pytest.approx(1.6 - 1.5)
    assert first_b["time_to_target_s"] == 10  # 2.2 at 5 s is above 2.05
    assert (first_b["ce_at_6s"], first_b["ce_at_20s"]) == (2.2, 1.6)
    assert (first_b["sent_mb"], first_b["cross_mb"]) == (2.0, 1.0)  # 4 MB, 2 of them across
    assert runs[0]["diff_ce"] == 0.0 and runs[0]["time_to_target_s"] == 10
    assert runs[2]["time_to_target_s"] == 20  # 2.1 at 10 s is above it
    slow = runs[4]
    assert slow["diff_ce"] is None  # no baseline run in that scenario
    assert slow["time_to_target_s"] is None
    assert slow["divergence"].startswith("held-out CE diverged: 9 at step 2, more than 2x")
    assert runs[0]["divergence"] == ""


def test_summary_rows_pair_the_seeds():
    runs = table.run_rows(REPORTS, "a", target=2.05, budgets=[6])
    rows = {(r["strategy"], r["scenario"]): r for r in table.summary_rows(runs, [6])}
    assert list(rows) == [("a", "none"), ("b", "none"), ("b", "slow")]
    b = rows["b", "none"]
    diffs = [1.6 - 1.5, 1.6 - 1.7]  # seed 0, seed 1
    assert b["seeds"] == 2 and b["final_ce"] == pytest.approx(1.6)
    assert b["final_ce_sd"] == pytest.approx(0.0)
    assert b["diff_ce"] == pytest.approx(sum(diffs) / 2)
    assert b["diff_ce_sd"] == pytest.approx(math.sqrt(sum((d - 0) ** 2 for d in diffs) / 1))
    assert (b["time_to_target_s"], b["reached"]) == ((10 + 5) / 2, 2)
    assert b["ce_at_6s"] == pytest.approx((2.2 + 2.0) / 2)
    a = rows["a", "none"]
    assert a["final_ce_sd"] == pytest.approx(math.sqrt(2 * 0.1 ** 2))
    assert (a["time_to_target_s"], a["reached"]) == (15, 2)
    slow = rows["b", "slow"]
    assert (slow["seeds"], slow["reached"], slow["time_to_target_s"]) == (1, 0, None)
    assert (slow["final_ce_sd"], slow["diff_ce"], slow["diverged"]) == (None, None, 1)


def test_csv_and_markdown():
    runs = table.run_rows(REPORTS, "a", target=2.05, budgets=[6])
    rows = table.summary_rows(runs, [6])
    text = table.to_csv(rows).splitlines()
    assert text[0] == ("strategy,scenario,seeds,final_ce,final_ce_sd,diff_ce,diff_ce_sd,"
                       "end_time_s,time_to_target_s,reached,ce_at_6s,sent_mb,cross_mb,diverged,"
                       "failed,failed_at_s")
    assert len(text) == 4 and text[3] == "b,slow,1,9.0,,,,30.0,,0,3.0,0.0,0.0,1,0,"
    md = table.to_markdown(rows, "a", 2.05, [6]).splitlines()
    assert md[0].startswith("| strategy | scenario | seeds | final CE (sd) | - a (sd) |")
    assert md[3] == ("| b | none | 2 | 1.6000 (0.0000) | +0.0000 (0.1414) | 10 | 7.5 (2/2) | "
                     "2.1000 | 2 (1) |")
    assert md[4].startswith("| b (1 diverged) | slow | 1 | 9.0000 | - | 30 | - (0/1) |")
