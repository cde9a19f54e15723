import pytest

from asrdist.errors import AsrdistError
from bench.studies.network import exchange_alone
from bench.studies.outer_network import config, methods, parse_args, summarise, time_to

PROBE = {"swap_cross": 2.8, "swap_node": 0.2, "allreduce_all": 2.0, "allreduce_node": 0.1}


def test_methods_run_the_references_then_each_averaging_method_at_its_periods():
    got = methods([10, 50], [10])
    assert list(got) == ["ssgd", "adpsgd-random", "ma H=10", "bmuf H=10", "bmuf H=50",
                         "diloco H=10", "diloco H=50"]
    assert got["diloco H=50"] == ("diloco", 50)
    assert list(methods([20], [])) == ["ssgd", "adpsgd-random", "bmuf H=20", "diloco H=20"]


def test_only_keeps_the_named_methods_and_names_an_unknown_one():
    assert list(methods([10, 50], [10], ["bmuf H=50", "ssgd"])) == ["ssgd", "bmuf H=50"]
    with pytest.raises(AsrdistError, match="--only 'bmuf H=20': not one of ssgd, "):
        methods([10], [], ["bmuf H=20"])


def test_a_period_below_one_is_a_one_line_error_naming_the_option():
    with pytest.raises(AsrdistError, match="--periods / --ma-periods: 0"):
        methods([10, 0], [10])


def test_the_averaging_methods_send_one_allreduce_of_four_per_block():
    assert exchange_alone("bmuf", PROBE, 10) == pytest.approx(0.2)
    assert exchange_alone("diloco", PROBE, 50) == pytest.approx(0.04)
    assert exchange_alone("ma", PROBE, 1) == pytest.approx(2.0)
    assert exchange_alone("ssgd", PROBE) == pytest.approx(2.0)
    assert exchange_alone("adpsgd-random", PROBE) == pytest.approx(1.5)  # (2.8 + 0.2) / 2


def test_bmuf_and_diloco_get_their_own_options_and_bmuf_its_inner_lr():
    args = parse_args(["--lr", "0.03", "--bmuf-inner-lr", "0.01", "--bmuf-block-lr", "0.5",
                       "--diloco-lr", "0.4"])
    bmuf = config("bmuf", 10, args)
    assert bmuf.lr == 0.01
    assert bmuf.options == {"avg_period": 10, "bmuf_momentum": -1.0, "bmuf_lr": 0.5}
    diloco = config("diloco", 50, args)
    assert diloco.lr == 0.03
    assert diloco.options == {"avg_period": 50, "diloco_lr": 0.4, "diloco_momentum": 0.9}
    assert config("adpsgd-random", 1, args).options == {}
    assert config("bmuf", 10, parse_args(["--lr", "0.05"])).lr == 0.05  # default: --lr


@pytest.mark.parametrize("argv, message", [
    (["--steps", "2"], "--steps 2"),
    (["--eval-every", "0"], "--eval-every 0"),
    (["--loopback", "--publish", "R.md"], "--loopback with --publish"),
])
def test_bad_arguments_are_one_line_errors_naming_the_option(argv, message):
    with pytest.raises(AsrdistError, match=message):
        parse_args(argv)


def _learner(compute_s, step_s, final_s, evals=(), final_ce=0.0, done_s=None):
    return {"compute_s": compute_s, "step_s": step_s, "final_s": final_s,
            "done_s": final_s if done_s is None else done_s, "evals": list(evals),
            "final_ce": final_ce}


def test_summary_of_a_block_method_by_hand():
    # two learners, H = 10, allreduce alone 2.0 s: 0.2 s a step to hide. Steps after the
    # first 2: learner 0 (0.4 + 0.4 + 1.0) / 3 = 0.6, learner 1 (0.5 + 0.5 + 0.8) / 3 = 0.6;
    # compute (0.35 + 0.45) / 2 = 0.4; wait 0.2: nothing hidden; 2 learners / 0.6 s.
    results = [_learner(0.35, [9.0, 9.0, 0.4, 0.4, 1.0], 7.0,
                        [(0.0, 0, 3.5), (4.0, 5, 2.0)], final_ce=1.8, done_s=4.5),
               _learner(0.45, [9.0, 9.0, 0.5, 0.5, 0.8], 7.5, done_s=5.0)]
    s = summarise("bmuf H=10", "bmuf", 10, results, PROBE)
    assert s["compute_s"] == pytest.approx(0.4)
    assert s["step_s"] == pytest.approx(0.6)
    assert s["wait_s"] == pytest.approx(0.2)
    assert s["alone_s"] == pytest.approx(0.2)
    assert s["hidden"] == pytest.approx(0.0)
    assert s["steps_s"] == pytest.approx(2 / 0.6)
    assert s["final_s"] == 7.5  # the last learner's
    assert s["done_s"] == 5.0
    assert s["run_steps_s"] == pytest.approx(10 / 5.0)  # 2 x 5 steps by the last one's end
    assert s["curve"] == [(0.0, 3.5), (4.0, 2.0), (7.5, 1.8)]
    assert s["steps_curve"] == [(0, 3.5), (5, 2.0)]


def test_summary_of_a_swap_method_by_hand():
    # adpsgd: alone (2.8 + 0.2) / 2 = 1.5 s; steps 0.7 and 0.5 (mean 0.6), compute 0.4 and
    # 0.2 (mean 0.3): waits 0.3, hides 80 %. Learner 0 ends at 4 s, learner 1 at 16 s: the
    # mean pace is 2 / 0.6 steps/s, the run 8 steps in 16 s.
    results = [_learner(0.4, [0.7, 0.7, 0.7, 0.7], 4.5, done_s=4.0),
               _learner(0.2, [0.5, 0.5, 0.5, 0.5], 16.5, done_s=16.0)]
    s = summarise("adpsgd-random", "adpsgd-random", 1, results, PROBE)
    assert s["hidden"] == pytest.approx(0.8)
    assert s["steps_s"] == pytest.approx(2 / 0.6)
    assert s["run_steps_s"] == pytest.approx(0.5)


def test_time_to_is_the_first_point_at_or_below_the_target():
    curve = [(0.0, 3.5), (4.0, 2.0), (9.0, 1.5), (12.0, 1.6)]
    assert time_to(curve, 2.0) == 4.0
    assert time_to(curve, 1.55) == 9.0
    assert time_to(curve, 1.4) is None
