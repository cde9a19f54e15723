"""Study 1's grid, its convergence rule and its verdict, on hand-made numbers (the runs
themselves are the study's job, not a test's)."""

from __future__ import annotations

import argparse
import json
import math

import pytest

from bench.studies import large_batch
from bench.studies.large_batch import (
    Point,
    Study,
    clear_of_spread,
    converged_epoch,
    deciding_batches,
    few_points,
    largest_within,
    make_spec,
    sweep_points,
    verdict,
    wer_lines,
    wide_points,
    within,
)


def options(**kw) -> argparse.Namespace:
    values = dict(baseline_batch=16, multiples=[4, 16, 64], learners=[16, 64],
                  wide_multiples=[16, 64], min_batch=4, strategies=["ssgd", "adpsgd-random"],
                  few_strategies=["hadpsgd"], few_multiples=[16], epochs=6, warmup_epochs=1.0,
                  anneal_start=4, anneal_factor=math.sqrt(2))
    values.update(kw)
    return argparse.Namespace(**values)


def test_sweep_is_the_baseline_and_every_strategy_at_every_multiple():
    got = sweep_points(options())
    assert got[0] == Point("single", 1, 16)
    assert got[1:] == [Point(a, 16, b) for a in ("ssgd", "adpsgd-random")
                       for b in (64, 256, 1024)]


def test_sweep_skips_per_learner_batches_below_the_least():
    got = sweep_points(options(multiples=[2, 4], min_batch=4))
    # 32 chunks over 16 learners is 2 each: below 4
    assert got == [Point("single", 1, 16), Point("ssgd", 16, 64), Point("adpsgd-random", 16, 64)]


def test_extra_points_are_more_learners_at_the_wide_multiples_and_the_few_strategies():
    assert wide_points(options()) == [
        Point("ssgd", 64, 256), Point("ssgd", 64, 1024),
        Point("adpsgd-random", 64, 256), Point("adpsgd-random", 64, 1024)]
    assert few_points(options(few_multiples=[16, 4])) == [Point("hadpsgd", 16, 64),
                                                          Point("hadpsgd", 16, 256)]
    # 64 learners at 16 x 4 = 64 chunks would be 1 chunk each
    assert Point("ssgd", 64, 64) not in wide_points(options(wide_multiples=[4]))


def test_spec_scales_the_peak_and_anneals_from_the_start_epoch():
    spec = make_spec(options(), Point("adpsgd-random", 16, 1024), 0.2, seed=2)
    assert (spec.learners, spec.batch, spec.epochs, spec.seed, spec.evals) == (16, 64, 6.0, 2, 6)
    s = spec.schedule
    assert spec.global_batch() / s.lr_ref_batch * s.lr == 0.8  # the peak: 0.2 x 1024 / 256
    assert (s.lr, s.lr_ref_batch, s.lr_scaling, s.anneal_start) == (0.2, 256, "linear", 4)
    assert s.anneal_factor == math.sqrt(2)


def test_probe_spec_does_not_anneal_and_does_not_depend_on_the_anneal_options():
    a = make_spec(options(anneal_start=4), Point("single", 1, 16), 0.2, epochs=12, anneal=False)
    b = make_spec(options(anneal_start=7), Point("single", 1, 16), 0.2, epochs=12, anneal=False)
    assert a == b and a.schedule.anneal_factor == 1.0 and a.evals == 12


def test_converged_epoch_is_where_an_epoch_first_gains_half_a_percent_or_less():
    # gains: 10 %, 5 %, 0.4 % (stop after epoch 3), then 1 % again (not looked at)
    assert converged_epoch([2.0, 1.8, 1.71, 1.70316, 1.686]) == 3
    assert converged_epoch([2.0, 1.8, 1.6]) == 3  # still improving: all of them
    assert converged_epoch([2.0, 2.01]) == 1  # got worse
    assert converged_epoch([2.0, 1.991]) == 1  # 0.45 %: not more than 0.5 %
    assert converged_epoch([2.0, 1.989]) == 2  # 0.55 %


def test_within_compares_the_seeds_means():
    base = [2.0, 2.1, 1.9]  # mean 2.0, threshold 2.04
    assert within([2.03, 2.05], base)  # mean 2.04
    assert not within([2.05, 2.05], base)


def test_clear_of_spread_needs_the_mean_beyond_both_deviations():
    base = [2.0, 2.0, 2.0]  # sd 0: threshold 2.04
    assert clear_of_spread([2.10, 2.12, 2.14], base)  # mean 2.12, sd 0.02: 0.08 > 0.02
    assert not clear_of_spread([2.0, 2.06, 2.12], base)  # mean 2.06, sd 0.06: 0.02 < 0.06
    assert clear_of_spread([2.1], base)  # one seed: no spread
    # the baseline's spread counts too: sd 0.1 x 1.02 = 0.102 > |2.12 - 2.04|
    assert not clear_of_spread([2.12], [1.9, 2.0, 2.1])


def test_largest_within_and_the_deciding_batches():
    base = [2.0]
    by = {64: [2.01], 256: [2.03], 1024: [2.2], 128: [2.1]}  # 128 fails, 256 passes
    assert largest_within(by, base) == 256
    assert deciding_batches(by, base) == [256, 1024]
    assert deciding_batches({64: [2.5], 256: [2.6]}, base) == [64]  # none within: the smallest
    assert deciding_batches({64: [2.0], 256: [2.0]}, base) == [256]  # the top: no next
    assert largest_within({64: [2.5]}, base) is None


GRID = [64, 128, 256, 512, 1024]


def test_verdict_confirmed_refuted_partly():
    assert verdict(256, 1024, GRID)[0] == "confirmed"  # 4x
    assert verdict(256, 256, GRID)[0] == "refuted"  # same
    assert verdict(256, 128, GRID)[0] == "refuted"  # smaller
    word, why = verdict(256, 512, GRID)  # 2x: larger, by less than 3x
    assert word == "partly"
    # true limits: SSGD in [256, 512), ADPSGD in [512, 1024): ratio in (1, 4)
    assert "between 1 and 4" in why


def test_verdict_at_the_grid_edges():
    assert verdict(1024, 1024, GRID)[0] == "undecided"  # ssgd's limit is beyond the grid
    assert verdict(None, None, GRID)[0] == "undecided"
    assert verdict(256, None, GRID)[0] == "refuted"
    # ssgd fails everywhere (limit below 64), adpsgd good to 256: ratio > 256 / 64 = 4
    assert verdict(None, 256, GRID)[0] == "confirmed"
    assert verdict(None, 128, GRID)[0] == "undecided"  # ratio > 2 only
    word, why = verdict(64, 1024, GRID)  # adpsgd at the top: a lower bound, inf above
    assert word == "confirmed" and "between 8 and inf" in why


class _Keys:
    """A runner that only names runs (the WER jobs here are done already)."""

    def key(self, spec, speed) -> str:
        return f"{spec.algo}-{spec.learners}-{spec.batch}-{spec.schedule.lr:g}"


def test_wers_are_of_the_baseline_and_the_deciding_points_at_their_best_rate(tmp_path):
    args = options(lr_refs=[0.1, 0.4], seeds=1, cache=str(tmp_path), hours="0.75",
                   wer=["graph", "test", "text"])
    study = Study(_Keys(), args)
    ces = {(Point("single", 1, 16), 0.1): 2.0, (Point("single", 1, 16), 0.4): 2.1,
           (Point("ssgd", 16, 64), 0.1): 2.05, (Point("ssgd", 16, 64), 0.4): 2.01,
           (Point("ssgd", 16, 256), 0.4): 2.03, (Point("ssgd", 16, 1024), 0.4): 2.2,
           (Point("adpsgd-random", 16, 64), 0.4): 2.5}
    study.results = {(p, lr, 0): {"records": [{"heldout_ce": ce}]} for (p, lr), ce in ces.items()}
    want = [("single", 1, 16, 0.1), ("ssgd", 16, 256, 0.4), ("ssgd", 16, 1024, 0.4),
            ("adpsgd-random", 16, 64, 0.4)]
    for i, (algo, n, b, lr) in enumerate(want):  # done already: nothing is run
        out = tmp_path / "wer" / f"{algo}-{n}-{b // n}-{lr:g}"
        out.mkdir(parents=True)
        (out / "wer.json").write_text(json.dumps(
            {"heldout_ce": 2.0, "best": "10_0.0", "wer": 20.0 + i, "errors": 200 + 10 * i,
             "ref_words": 1000}))
    got = study.wers()
    assert [(p.algo, p.learners, p.batch, lr) for p, lr, _ in got] == want
    rows = [line for line in wer_lines(study, got) if line.startswith("| ssgd | 16 | 1024")]
    assert rows == ["| ssgd | 16 | 1024 | 0.4 | 2.2000 | 2.0000 | 22.00 | 220 / 1000 | 10_0.0 "
                    "| +2.00 |"]


def test_wer_inputs_missing_are_named_before_the_sweep(tmp_path):
    graph, data, text = tmp_path / "graph", tmp_path / "test", tmp_path / "text"
    graph.mkdir()
    data.mkdir()
    (graph / "HCLG.fst").write_bytes(b"")
    assert large_batch.missing_wer_input(str(graph), str(data), str(text)) == \
        f"--wer GRAPH: no file {graph / 'words.txt'}"
    (graph / "words.txt").write_text("<eps> 0\n")
    assert large_batch.missing_wer_input(str(graph), str(data), str(text)) == \
        f"--wer TEST_DATA: no file {data / 'feats.scp'}"
    (data / "feats.scp").write_text("")
    assert large_batch.missing_wer_input(str(graph), str(data), str(text)) == \
        f"--wer TEST_TEXT: no file {text}"
    text.write_text("")
    assert large_batch.missing_wer_input(str(graph), str(data), str(text)) is None


class _FakeRuns(Study):
    """A study whose runs give the CE of a table (and say what was asked of them)."""

    def __init__(self, ces: dict[Point, float], cached: set[Point]) -> None:
        runner = _Keys()
        runner.cached = lambda spec, speed: any(  # type: ignore[attr-defined]
            (p.algo, p.batch // p.learners) == (spec.algo, spec.batch) for p in cached)
        super().__init__(runner, options(lr_refs=[0.1, 0.4], seeds=1, lr_from="ssgd",
                                         few_strategies=["ma", "hadpsgd"],
                                         few_multiples=[4, 16, 64]))
        self.table, self.asked = ces, []
        self.results = {(Point("single", 1, 16), 0.1, 0): {"records": [{"heldout_ce": 2.0}]}}
        for b in (64, 256, 1024):  # --lr-from's best rate at each batch: 0.4
            self.results[(Point("ssgd", 16, b), 0.4, 0)] = {"records": [{"heldout_ce": 2.0}]}

    def run(self, jobs):
        self.asked += [(p.algo, p.batch, lr) for p, lr, _ in jobs]
        for p, lr, seed in jobs:
            self.results[(p, lr, seed)] = {"records": [{"heldout_ce": self.table[p]}]}


def test_the_few_strategies_run_upwards_and_stop_at_the_first_batch_beyond_2_percent():
    ma, had = (lambda b: Point("ma", 16, b)), (lambda b: Point("hadpsgd", 16, b))
    # threshold 2.0 x 1.02 = 2.04: ma fails at 4x, hadpsgd at 64x
    ces = {ma(64): 2.05, ma(256): 2.03, ma(1024): 2.2,
           had(64): 2.01, had(256): 2.03, had(1024): 2.1}
    study = _FakeRuns(ces, cached={ma(1024)})
    study.run_upwards(few_points(study.args))
    assert study.asked == [("ma", 64, 0.4), ("hadpsgd", 64, 0.4),
                           ("ma", 1024, 0.4),  # ma stops; its cached 64x is still shown
                           ("hadpsgd", 256, 0.4), ("hadpsgd", 1024, 0.4)]
    assert largest_within(study.by_batch("hadpsgd", 16), study.base()) == 256
    assert largest_within(study.by_batch("ma", 16), study.base()) is None


def test_bmuf_runs_study_4_s_tuned_filter_at_every_learner_count():
    # zeta N (1 + eta) = 2 by hand: 2 / (16 x 1.5) = 1/12 (Study 4's 0.0833), 2 / 96 at 64
    for learners, zeta in ((16, 1 / 12), (64, 2 / 96)):
        spec = make_spec(options(), Point("bmuf", learners, 1024), 0.4)
        assert spec.options == {"avg_period": 8, "bmuf_momentum": 0.5,
                                "bmuf_lr": pytest.approx(zeta)}
    assert make_spec(options(), Point("diloco", 16, 256), 0.4).options == {"avg_period": 8}
