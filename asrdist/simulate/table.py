"""The comparison's table: what each strategy reached in each scenario, over seeds, against a
baseline strategy.

Per run: the final held-out CE (the exported model's record), the simulated time to the end,
the time of the first evaluation at or below the target CE (its resolution is the run's
evaluations), the CE of the last evaluation within each time budget (what a run stopped then
would have evaluated), the megabytes each learner sent on average, across nodes and in all, and
whether its held-out CE diverged (by the guard of today's code, also for runs made before).
Per strategy and scenario: the runs' means, the final CE's standard deviation over seeds, and
the paired difference of the final CE from the baseline's in the same scenario and seed (the
same initial weights, batches and held-out chunks), with its standard deviation over seeds:
the seeds' own spread cancels in it.

A run that a lost learner ended (a fail-stop strategy's: ``failed`` in its report) has no
exported model: no final CE, no difference from the baseline, no CE at budgets past its end;
its row says when it failed, and its strategy's summary row counts it as failed, never as a
finished run (its figures are those of the runs that finished, if any).
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections.abc import Sequence
from typing import Any

from asrdist.simulate import guards

Report = dict[str, Any]


def failed(report: Report) -> dict[str, Any] | None:
    """Where a lost learner ended the run (None: it finished)."""
    return report.get("failed")


def final_ce(report: Report) -> float | None:
    """The exported model's CE (None: the run failed, nothing was exported)."""
    if failed(report) is not None:
        return None
    return float(report["records"][-1]["heldout_ce"])


def time_to(report: Report, target: float) -> float | None:
    """Simulated time of the first evaluation at or below ``target`` (None: never)."""
    return next((r["time_s"] for r in report["records"] if r["heldout_ce"] <= target), None)


def ce_at(report: Report, budget: float) -> float | None:
    """CE of the last evaluation at or before ``budget`` seconds (the start's is at 0);
    None past a failed run's end."""
    end = failed(report)
    if end is not None and budget > end["time_s"]:
        return None
    return [r["heldout_ce"] for r in report["records"] if r["time_s"] <= budget][-1]


def failure_note(report: Report) -> str:
    """'failed at T s (learner R lost at step K)', or '' for a finished run."""
    end = failed(report)
    if end is None:
        return ""
    return f"failed at {end['time_s']:.4g} s (learner {end['learner']} lost at step {end['step']})"


def sent_mb(report: Report) -> tuple[float, float]:
    """Megabytes a learner sent on average: (in all, across nodes)."""
    wire, learners = report["summary"]["wire_bytes"], report["spec"]["learners"]
    return ((wire["node"] + wire["cross"]) / learners / 1e6, wire["cross"] / learners / 1e6)


def run_rows(reports: Sequence[Report], baseline: str, target: float,
             budgets: Sequence[float]) -> list[dict[str, Any]]:
    """One row per run, with its paired difference from the baseline's run (None where that
    run is missing)."""
    base = {(r["scenario"], r["seed"]): final_ce(r) for r in reports
            if r["strategy"] == baseline}
    rows = []
    for r in reports:
        paired, ce = base.get((r["scenario"], r["seed"])), final_ce(r)
        sent, cross = sent_mb(r)
        rows.append({
            "strategy": r["strategy"], "scenario": r["scenario"], "seed": r["seed"],
            "final_ce": ce,
            "diff_ce": None if paired is None or ce is None else ce - paired,
            "end_time_s": r["summary"]["time_s"], "time_to_target_s": time_to(r, target),
            **{_budget_column(b): ce_at(r, b) for b in budgets},
            "sent_mb": sent, "cross_mb": cross,
            "divergence": guards.diverged(r["records"]) or "",
            "failed": failure_note(r),
        })
    return rows


def summary_rows(runs: Sequence[dict[str, Any]], budgets: Sequence[float]
                 ) -> list[dict[str, Any]]:
    """One row per strategy and scenario (in the order they first appear) over its seeds."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in runs:
        groups.setdefault((row["strategy"], row["scenario"]), []).append(row)
    out = []
    for (strategy, scenario), rows in groups.items():
        reached = [r["time_to_target_s"] for r in rows if r["time_to_target_s"] is not None]
        diffs = [r["diff_ce"] for r in rows if r["diff_ce"] is not None]
        finals = [r["final_ce"] for r in rows if r["final_ce"] is not None]
        out.append({
            "strategy": strategy, "scenario": scenario, "seeds": len(rows),
            "final_ce": _mean(finals), "final_ce_sd": _sd(finals),
            "diff_ce": _mean(diffs), "diff_ce_sd": _sd(diffs),
            "end_time_s": _mean([r["end_time_s"] for r in rows]),
            "time_to_target_s": _mean(reached), "reached": len(reached),
            **{(c := _budget_column(b)): _mean([r[c] for r in rows if r[c] is not None])
               for b in budgets},
            "sent_mb": _mean([r["sent_mb"] for r in rows]),
            "cross_mb": _mean([r["cross_mb"] for r in rows]),
            "diverged": sum(bool(r["divergence"]) for r in rows),
            "failed": sum(bool(r["failed"]) for r in rows),
            "failed_at_s": _mean([float(r["end_time_s"]) for r in rows if r["failed"]]),
        })
    return out


def _budget_column(budget: float) -> str:
    return f"ce_at_{budget:g}s"


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _sd(values: Sequence[float]) -> float | None:
    """Sample standard deviation over seeds (None below two)."""
    return statistics.stdev(values) if len(values) > 1 else None


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as CSV, an empty cell where a figure is missing."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
    return out.getvalue()


def to_markdown(rows: Sequence[dict[str, Any]], baseline: str, target: float,
                budgets: Sequence[float]) -> str:
    """The summary rows as a markdown table, with a line saying what its columns are."""
    head = ["strategy", "scenario", "seeds", "final CE (sd)", f"- {baseline} (sd)",
            "end (s)", f"time to CE {target:.4g} (s)",
            *(f"CE at {b:g} s" for b in budgets), "MB sent / learner (across nodes)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["strategy"], r["scenario"], str(r["seeds"]),
                 _pm(r["final_ce"], r["final_ce_sd"]), _pm(r["diff_ce"], r["diff_ce_sd"], "+"),
                 _num(r["end_time_s"]),
                 f"{_num(r['time_to_target_s'])} ({r['reached']}/{r['seeds']})",
                 *(_num(r[_budget_column(b)], ".4f") for b in budgets),
                 f"{_num(r['sent_mb'])} ({_num(r['cross_mb'])})"]
        if r["diverged"]:
            cells[0] += f" ({r['diverged']} diverged)"
        if r["failed"]:
            cells[0] += f" ({r['failed']} failed)"
            cells[3] = (f"failed at {_num(r['failed_at_s'])} s" if r["failed"] == r["seeds"]
                        else f"{cells[3]}; {r['failed']} failed")
        lines.append("| " + " | ".join(cells) + " |")
    note = (f"\nFinal CE: the exported model's held-out CE, mean over seeds (sd). "
            f"- {baseline}: the paired difference from {baseline} in the same scenario and "
            f"seed. Time to CE: mean over the seeds that reached it (how many did). Times are "
            f"simulated seconds.")
    if any(r["failed"] for r in rows):
        note += (" Failed: a lost learner ended the run (a fail-stop strategy's job ends "
                 "there), at the simulated time given; it exported no model, so it has no "
                 "final CE, and its CE at a budget past its end is '-'.")
    note += "\n"
    return "\n".join(lines) + "\n" + note


def _num(value: float | None, fmt: str = ".4g") -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, fmt)


def _pm(value: float | None, sd: float | None, sign: str = "") -> str:
    if value is None:
        return "-"
    text = format(value, f"{sign}.4f")
    return text if sd is None else f"{text} ({sd:.4f})"
