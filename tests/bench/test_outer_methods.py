import sys

import pytest
import torch

from asrdist.parallel import registry
from asrdist.parallel.strategies.outer import BlockMomentum
from bench.studies.outer_methods import (
    BmufPoint,
    best,
    bmuf_grid,
    eta_token,
    eta_value,
    grid_table,
    main,
    methods,
    parser,
    speed_model,
    steady_gain,
    time_to,
    tuned_periods,
)


def test_methods_give_each_periodic_strategy_its_own_periods():
    got = methods({"ma": [10], "bmuf": [10], "diloco": [10, 200]})
    assert list(got) == ["ssgd", "adpsgd-random", "hadpsgd", "ma H=10", "bmuf H=10 untuned",
                         "bmuf H=10 untuned lr/N", "diloco H=10", "diloco H=200"]
    assert got["diloco H=200"] == ("diloco", {"avg_period": 200}, False)
    assert got["bmuf H=10 untuned lr/N"] == ("bmuf", {"avg_period": 10}, True)


def test_a_message_of_the_small_model_lasts_as_long_as_173_mb_over_the_link():
    speed = speed_model(100e6 / 8, 280_000, 16, 21)
    assert speed.compute_s == pytest.approx(16 * 21 * 53e-6)
    # 173 MB at 12.5 MB/s is 13.84 s, plus 0.1 ms of latency
    assert speed.send_s(280_000, 0, 1) == pytest.approx(13.8401)  # learners on two nodes


RECORDS = [{"time_s": 2.0, "heldout_ce": 3.0}, {"time_s": 5.0, "heldout_ce": 2.5},
           {"time_s": 9.0, "heldout_ce": 2.0}]


def test_time_to_is_the_first_evaluation_at_or_below_the_target():
    assert time_to(RECORDS, 2.5) == 5.0
    assert time_to(RECORDS, 2.7) == 5.0
    assert time_to(RECORDS, 3.0) == 2.0
    assert time_to(RECORDS, 1.9) is None


# -- the bmuf grid ------------------------------------------------------------------------------

ARGS = ["--data", "d", "--targets", "t"]


def test_the_grid_options_default_to_nine_inner_lr_and_six_zeta_points_at_h_10():
    args = parser().parse_args(ARGS)
    assert args.bmuf_etas == ["0.5", "0.75", "1-1/N"]
    assert args.bmuf_lr_mults == [0.5, 1.0, 2.0]
    assert args.bmuf_zeta_etas == ["0.5", "0.75"]
    assert args.bmuf_zeta_mults == [1.0, 2.0, 4.0]
    assert args.bmuf_grid_period == 10
    assert args.bmuf_tuned_periods == [50]


def test_grid_options_parse_and_an_empty_eta_list_turns_the_grid_off():
    args = parser().parse_args([*ARGS, "--bmuf-etas", ".50", "1-1/N", "0",
                                "--bmuf-lr-mults", "1", "4", "--bmuf-grid-period", "50",
                                "--bmuf-tuned-periods", "--bmuf-zeta-etas", "0.9",
                                "--bmuf-zeta-mults", "8"])
    assert args.bmuf_etas == ["0.5", "1-1/N", "0"]
    assert args.bmuf_lr_mults == [1.0, 4.0]
    assert (args.bmuf_zeta_etas, args.bmuf_zeta_mults) == (["0.9"], [8.0])
    assert args.bmuf_grid_period == 50
    assert args.bmuf_tuned_periods == []
    assert parser().parse_args([*ARGS, "--bmuf-etas"]).bmuf_etas == []


@pytest.mark.parametrize("option, value", [("--bmuf-etas", "1"), ("--bmuf-etas", "-0.1"),
                                           ("--bmuf-etas", "1-1/n"), ("--bmuf-etas", "x"),
                                           ("--bmuf-lr-mults", "0"),
                                           ("--bmuf-lr-mults", "-2"), ("--bmuf-lr-mults", "a"),
                                           ("--bmuf-zeta-etas", "1.5"),
                                           ("--bmuf-zeta-mults", "0"),
                                           ("--bmuf-grid-period", "0"),
                                           ("--bmuf-tuned-periods", "2.5")])
def test_a_bad_grid_value_is_a_usage_error_naming_the_option(option, value, capsys):
    with pytest.raises(SystemExit) as exc:
        parser().parse_args([*ARGS, option, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert option in err and repr(value) in err


def test_eta_values():
    assert eta_value("1-1/N", 16) == 0.9375
    assert eta_value("1-1/N", 64) == 0.984375
    assert eta_value("0.75", 64) == 0.75
    assert eta_token("0.750") == "0.75"


def test_the_settled_gain_by_hand():
    # v -> eta v + (1 - eta) N G settles at v = N G; classic moves the start by v, Nesterov
    # by v + eta v
    assert steady_gain(16, 0.5, nesterov=False) == 16
    assert steady_gain(16, 0.5, nesterov=True) == 24  # 16 * 1.5
    assert steady_gain(64, 0.984375, nesterov=True) == 127  # 64 * (2 - 1/64)


@pytest.mark.parametrize("learners, eta, nesterov, gain", [(16, 0.5, True, 24.0),
                                                            (16, 0.5, False, 16.0),
                                                            (4, 0.75, True, 7.0)])
def test_the_strategys_filter_settles_at_that_gain(learners, eta, nesterov, gain):
    rule, start, moved = BlockMomentum(learners, eta, 1.0, nesterov), torch.zeros(1), []
    for _ in range(200):  # G = 1 every block: the learners' mean is 1 below the start
        new = rule.block(start, start - 1.0)
        moved.append((start - new).item())
        start = new
    assert moved[0] == pytest.approx((1 - eta) * gain)  # the first block: v = (1 - eta) N G
    assert moved[-1] == pytest.approx(gain)


def test_the_grid_expands_eta_by_eta_and_its_points_know_their_lr_and_options():
    grid = bmuf_grid(["0.5", "1-1/N"], [0.5, 2.0], 10)
    assert grid == [BmufPoint(10, "0.5", 0.5), BmufPoint(10, "0.5", 2.0),
                    BmufPoint(10, "1-1/N", 0.5), BmufPoint(10, "1-1/N", 2.0)]
    # the inner lr: the multiple times ssgd's lr over the gain, zeta 1
    assert grid[1].lr(0.1, 16) == pytest.approx(2 * 0.1 / 24)
    assert grid[3].lr(0.1, 64) == pytest.approx(2 * 0.1 / 127)
    assert grid[3].zeta(64) == 1.0
    assert BmufPoint(10, "0.5", 1.0, nesterov=False).lr(0.1, 16) == pytest.approx(0.1 / 16)
    assert grid[3].label() == "bmuf H=10 eta=1-1/N lr x2"
    assert BmufPoint(50, "0.5", 1.0, False).label() == "bmuf H=50 eta=0.5 lr x1 classic"
    # the default filter's options are the untuned rows' (their cached runs are reused)
    assert grid[3].options(64) == methods({"ma": [], "bmuf": [10], "diloco": []})[
        "bmuf H=10 untuned"][1]
    classic = BmufPoint(10, "0.5", 1.0, nesterov=False).options(16)
    assert classic == {"avg_period": 10, "bmuf_momentum": 0.5, "bmuf_nesterov": False}
    made = registry.make_options("bmuf", classic)
    assert (made.avg_period, made.bmuf_momentum, made.bmuf_nesterov) == (10, 0.5, False)


def test_a_zeta_point_keeps_the_inner_lr_and_scales_zeta():
    point, = bmuf_grid(["0.75"], [4.0], 10, by_zeta=True)
    assert point.label() == "bmuf H=10 eta=0.75 zeta x4"
    assert point.lr(0.1, 16) == 0.1
    assert point.zeta(16) == pytest.approx(4 / 28)  # gain at zeta 1: 16 * 1.75
    assert point.zeta(64) == pytest.approx(4 / 112)
    classic = BmufPoint(10, "0.75", 4.0, nesterov=False, by_zeta=True)
    assert classic.zeta(16) == pytest.approx(4 / 16)
    options = classic.options(16)
    assert options == {"avg_period": 10, "bmuf_momentum": 0.75, "bmuf_lr": 0.25,
                       "bmuf_nesterov": False}
    assert registry.make_options("bmuf", options).bmuf_lr == 0.25


def test_best_is_the_lowest_final_ce_the_first_of_equals():
    a, b, c = bmuf_grid(["0.5"], [0.5, 1.0, 2.0], 10)
    assert best({a: 2.3, b: 2.2, c: 2.4}) == b
    assert best({a: 2.2, b: 2.2, c: 2.4}) == a


def test_the_grid_table_marks_the_tuned_point():
    args = parser().parse_args([*ARGS, "--evals", "2"])
    point, other = BmufPoint(10, "1-1/N", 1.0), BmufPoint(10, "0.5", 2.0, by_zeta=True)
    grid = {16: {point: {"records": [{"heldout_ce": 3.0}, {"heldout_ce": 2.5},
                                     {"heldout_ce": 2.6}]},
                 other: {"records": [{"heldout_ce": 3.1}, {"heldout_ce": 2.8},
                                     {"heldout_ce": 2.7}]}}}
    lines = grid_table(args, grid, {16: point})
    # lr 0.1 / (16 * 1.9375) = 0.1 / 31; zeta 2 / 24 at lr 0.1: gain 2, step 0.2
    assert lines[-2] == ("| 16 | 1-1/N = 0.9375 | Nesterov | 0.00323 | 1 | 31 | 0.1 | "
                         "**2.6000** | 2.5000 |")
    assert lines[-1] == "| 16 | 0.5 | Nesterov | 0.1 | 0.0833 | 2 | 0.2 | 2.7000 | 2.7000 |"
    assert grid_table(args, {16: {}}, {}) == []


def test_the_tuned_rows_run_at_the_grid_period_and_the_tuned_periods_or_not_without_a_grid():
    assert tuned_periods(parser().parse_args(ARGS)) == [10, 50]
    assert tuned_periods(parser().parse_args([*ARGS, "--bmuf-zeta-etas"])) == [10, 50]
    assert tuned_periods(parser().parse_args([*ARGS, "--bmuf-etas", "--bmuf-zeta-etas"])) == []


@pytest.mark.parametrize("extra", [["--seed-methods", "bmuf H=20 tuned"],
                                   ["--seed-methods", "bmuf H=10 tuned", "--bmuf-etas",
                                    "--bmuf-zeta-etas"]])
def test_a_seed_method_that_is_not_run_is_a_usage_error_before_the_corpus_loads(
        extra, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "argv", ["outer_methods", "--data", str(tmp_path / "none"),
                                      "--targets", str(tmp_path / "none"), *extra])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    assert "--seed-methods: bmuf H=" in capsys.readouterr().err
