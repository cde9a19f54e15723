"""asrdist-compare on the tiny learnable corpus, as a process: the table's rows and columns,
its paired differences recomputed here from the runs' own reports, a rerun that keeps them."""

from __future__ import annotations

import csv
import json
import statistics

import pytest
from click.testing import CliRunner

from asrdist.cli import compare
from asrdist.simulate import guards
from asrdist.testing import make_corpus
from tests.cli_process import run_cli

TINY = ("--learners", "2", "--batch-size", "4", "--chunk-len", "5", "--heldout-utts", "4",
        "--layers", "1", "--units", "8", "--epochs", "1", "--evals", "3", "--lr", "0.3",
        "--lr-scaling", "none", "--latency", "0.05", "--bandwidth", "1e5")
GRID = ("--algo", "ssgd", "--algo", "ma:avg_period=2", "--scenario", "none",
        "--scenario", "straggler:1x3", "--seeds", "2")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("compare") / "corpus", num_utts=24)


@pytest.fixture(scope="module")
def compared(corpus, tmp_path_factory):
    data, targets = corpus
    out = tmp_path_factory.mktemp("out") / "cmp"
    res = run_cli("compare", "--data", data, "--targets", targets, "--out", out, *GRID, *TINY)
    assert res.returncode == 0, res.stderr
    return out, res


def _csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def _finals(out):
    """Each run's final CE, read from its own report."""
    found = {}
    for path in (out / "runs").glob("*.json"):
        report = json.loads(path.read_text())
        found[report["strategy"], report["scenario"], report["seed"]] = report
    return found


def test_the_table_has_a_row_per_strategy_and_scenario_paired_by_seed(compared):
    out, res = compared
    rows = _csv(out / "table.csv")
    assert [(r["strategy"], r["scenario"]) for r in rows] == [
        ("ssgd", "none"), ("ma:avg_period=2", "none"),
        ("ssgd", "straggler:1x3"), ("ma:avg_period=2", "straggler:1x3")]
    budgets = json.loads((out / "compare.json").read_text())["budgets_s"]
    assert list(rows[0]) == ["strategy", "scenario", "seeds", "final_ce", "final_ce_sd",
                             "diff_ce", "diff_ce_sd", "end_time_s", "time_to_target_s",
                             "reached", *(f"ce_at_{b:g}s" for b in budgets), "sent_mb",
                             "cross_mb", "diverged", "failed", "failed_at_s"]
    reports = _finals(out)
    assert len(reports) == 8 and len(_csv(out / "runs.csv")) == 8
    for row in rows:
        scenario = row["scenario"]
        finals = [reports[row["strategy"], scenario, s]["records"][-1]["heldout_ce"]
                  for s in (0, 1)]
        base = [reports["ssgd", scenario, s]["records"][-1]["heldout_ce"] for s in (0, 1)]
        diffs = [finals[0] - base[0], finals[1] - base[1]]
        assert float(row["seeds"]) == 2
        assert float(row["final_ce"]) == pytest.approx(statistics.fmean(finals))
        assert float(row["final_ce_sd"]) == pytest.approx(statistics.stdev(finals))
        assert float(row["diff_ce"]) == pytest.approx(statistics.fmean(diffs))
        assert float(row["diff_ce_sd"]) == pytest.approx(statistics.stdev(diffs), abs=1e-12)
    assert float(rows[1]["diff_ce"]) != 0.0  # averaging every 2 steps is not ssgd
    markdown = (out / "table.md").read_text()
    assert "| ma:avg_period=2 | straggler:1x3 | 2 |" in markdown and markdown in res.stdout
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "[1/8] ssgd | none | seed 0: final CE" in res.stderr
    assert "scenario straggler:1x3: speed model: a step computes 1 s + 0 s update; learner " \
        "1 3x slower" in res.stderr


def test_runs_of_one_seed_start_alike_and_a_straggler_only_slows_ssgd(compared):
    out, _ = compared
    reports = _finals(out)
    for seed in (0, 1):
        starts = {json.dumps(r["records"][0]) for (_, _, s), r in reports.items() if s == seed}
        assert len(starts) == 1  # the same weights, scored on the same held-out chunks
        fast, slow = reports["ssgd", "none", seed], reports["ssgd", "straggler:1x3", seed]
        assert fast["records"][-1]["heldout_ce"] == slow["records"][-1]["heldout_ce"]
        assert slow["summary"]["time_s"] > fast["summary"]["time_s"]
        assert slow["speed"]["slow"] == [{"learner": 1, "factor": 3.0}]
    assert all(r["records"][-1]["final"] for r in reports.values())
    assert reports["ma:avg_period=2", "none", 0]["spec"]["options"]["avg_period"] == 2


def test_a_run_s_report_has_the_fields_readers_of_runs_take(compared):
    """What asrdist-compare writes of each run (table, figures, asrdist-plot and a rerun's key
    check read them)."""
    out, _ = compared
    assert {tuple(sorted(r)) for r in _finals(out).values()} == {tuple(sorted((
        "version", "key", "strategy", "scenario", "seed", "spec", "speed", "cost", "data",
        "model", "steps", "warnings", "lost", "failed", "records", "summary", "host_s")))}


def test_every_run_has_its_event_files_beside_its_report(compared):
    """OUT/tensorboard/<the run's report name>: its held-out CE at its steps (a lab's
    TensorBoard shows the compared runs side by side)."""
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator",
        reason="the tensorboard extra is not installed")
    out, _ = compared
    reports = sorted((out / "runs").glob("*.json"))
    assert sorted(p.name for p in (out / "tensorboard").iterdir()) == [p.stem for p in reports]
    for path in reports:
        records = json.loads(path.read_text())["records"]
        events = event_accumulator.EventAccumulator(str(out / "tensorboard" / path.stem))
        events.Reload()
        assert [(e.step, e.value) for e in events.Scalars("heldout/heldout_ce")] == [
            (round(r["steps"]), pytest.approx(r["heldout_ce"], rel=1e-6)) for r in records]


def test_a_rerun_keeps_the_runs_and_a_changed_value_reruns_them(compared, corpus, tmp_path):
    out, _ = compared
    data, targets = corpus
    before = {p.name: p.read_bytes() for p in (out / "runs").glob("*.json")}
    events = sorted((out / "tensorboard").glob("*/events.out.tfevents*"))
    table = (out / "table.csv").read_text()
    again = run_cli("compare", "--data", data, "--targets", targets, "--out", out, *GRID, *TINY)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("(kept)") == 8
    assert {p.name: p.read_bytes() for p in (out / "runs").glob("*.json")} == before
    assert (out / "table.csv").read_text() == table
    assert sorted((out / "tensorboard").glob("*/events.out.tfevents*")) == events  # none new
    other = run_cli("compare", "--data", data, "--targets", targets, "--out", out,
                    "--algo", "ssgd", "--seeds", "1", *TINY, "--lr", "0.1")
    assert other.returncode == 0, other.stderr
    assert "(kept)" not in other.stderr
    assert len(_csv(out / "table.csv")) == 1


def test_asrdist_plot_draws_a_compared_run(compared, tmp_path):
    out, _ = compared
    png = tmp_path / "one.png"
    res = run_cli("plot", next((out / "runs").glob("*.json")), "--out", png)
    assert res.returncode == 0, res.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("args", "message"), [
    (("--algo", "ssgd", "--scenario", "slow"), "--scenario 'slow': expected 'none' or"),
    (("--algo", "ssgd", "--scenario", "straggler:2x3"), "no learner 2 among 2"),
    (("--algo", "nosuch"), "--algo 'nosuch': unknown --algo"),
    (("--algo", "ssgd", "--baseline", "ma"), "'ma' is none of the --algo given"),
    (("--algo", "ssgd", "--algo", "hadpsgd"), "--algo hadpsgd: --learners-per-node: needed"),
    (("--algo", "ssgd", "--scenario", "lost:1@1.5"), "FRACTION of its steps is in (0, 1)"),
    (("--algo", "ssgd", "--scenario", "straggler:0x2+lost:2@0.5"), "no learner 2 among 2"),
    (("--algo", "ssgd", "--scenario", "lost:1@0.5"),
     "ssgd is fail-stop, so every run of it in scenario lost:1@0.5 fails: give --target-ce"),
])
def test_bad_input_is_one_line_before_any_run(corpus, tmp_path, args, message):
    """In process: refused before any run is made or anything written (a strategy that
    cannot run with these learners once the corpus is loaded)."""
    data, targets = corpus
    res = CliRunner().invoke(compare.main, ["--data", str(data), "--targets", str(targets),
                                            "--out", str(tmp_path / "x"), *args, *TINY])
    assert res.exit_code in (1, 2)
    assert message in res.output.strip().splitlines()[-1]
    assert not (tmp_path / "x").exists()


def test_a_lost_learner_fails_a_fail_stop_run_and_an_elastic_one_goes_on(corpus, tmp_path):
    """Learner 1 of 2 lost halfway: ssgd's run ends there, its row says failed (no final CE,
    no export); adpsgd-random's survivor finishes and exports, with no difference from a
    baseline that exported nothing."""
    data, targets = corpus
    out = tmp_path / "lost"
    res = run_cli("compare", "--data", data, "--targets", targets, "--out", out,
                  "--algo", "ssgd", "--algo", "adpsgd-random", "--scenario", "lost:1@0.5",
                  "--seeds", "1", "--target-ce", "9", "--budget", "1", "--budget", "1000",
                  "--tensorboard", "none", *TINY)
    assert res.returncode == 0, res.stderr
    assert not (out / "tensorboard").exists()
    reports = _finals(out)
    failed = reports["ssgd", "lost:1@0.5", 0]
    steps = failed["steps"]["total"]
    assert failed["failed"]["learner"] == 1 and failed["failed"]["step"] == max(1, steps // 2)
    assert not any(r.get("final") for r in failed["records"])
    assert failed["summary"]["time_s"] == failed["failed"]["time_s"]
    went_on = reports["adpsgd-random", "lost:1@0.5", 0]
    assert went_on["failed"] is None and went_on["records"][-1]["final"]
    assert went_on["summary"]["departures"][0]["learner"] == 1
    rows = {r["strategy"]: r for r in _csv(out / "table.csv")}
    assert (rows["ssgd"]["final_ce"], rows["ssgd"]["failed"]) == ("", "1")
    assert rows["ssgd"]["ce_at_1000s"] == ""  # past its end: nothing to read there
    assert float(rows["adpsgd-random"]["final_ce"]) == went_on["records"][-1]["heldout_ce"]
    assert rows["adpsgd-random"]["diff_ce"] == "" and rows["adpsgd-random"]["failed"] == "0"
    markdown = (out / "table.md").read_text()
    at = f"{failed['failed']['time_s']:.4g}"
    assert f"| ssgd (1 failed) | lost:1@0.5 | 1 | failed at {at} s | - |" in markdown
    assert "Failed: a lost learner ended the run" in markdown
    assert f"ssgd | lost:1@0.5 | seed 0: failed at {at} s simulated: learner 1 lost" in res.stderr


@pytest.mark.parametrize("given", [(), ("--target-ce", "9", "--budget", "1")])
def test_every_learner_lost_is_a_failed_row_or_one_line(corpus, tmp_path, given):
    """An elastic strategy that loses its last learner has nothing to export: its run failed
    (its mean over no survivors was a traceback); as the only baseline, one line."""
    data, targets = corpus
    out = tmp_path / "all"
    res = CliRunner().invoke(compare.main, [
        "--data", str(data), "--targets", str(targets), "--out", str(out),
        "--algo", "adpsgd-random", "--scenario", "lost:0@0.5,1@0.5", "--seeds", "1",
        *given, *TINY])
    lines = res.output.strip().splitlines()
    if not given:
        assert res.exit_code == 1
        assert lines[-1] == ("Error: --baseline adpsgd-random failed in every run of scenario "
                             "lost:0@0.5,1@0.5: give --target-ce and --budget")
        assert not (out / "table.md").exists()
        return
    assert res.exit_code == 0, res.output
    [report] = _finals(out).values()
    assert "every learner is lost, so nothing is exported" in report["failed"]["why"]
    row = _csv(out / "table.csv")[0]
    assert (row["final_ce"], row["failed"]) == ("", "1")


def test_learners_that_cannot_fit_in_memory_are_refused_before_any_run(corpus, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(guards, "available_memory", lambda: 23 * 10**9)
    data, targets = corpus
    res = CliRunner().invoke(compare.main, ["--data", str(data), "--targets", str(targets),
                                            "--out", str(tmp_path / "x"), "--algo", "ssgd",
                                            "--learners", "1000"])
    assert res.exit_code == 1
    assert res.output.strip().splitlines()[-1].startswith(
        "Error: --learners 1000: the learners need at least 421.3 GB")
    assert not (tmp_path / "x").exists()
