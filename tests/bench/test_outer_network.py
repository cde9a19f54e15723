import pytest

from asrdist.errors import AsrdistError
from bench.results import generated
from bench.studies import outer_network
from bench.studies.network import exchange_alone
from bench.studies.outer_network import (
    Method,
    alone_per_step,
    config,
    from_log,
    goal,
    methods,
    parse_args,
    summarise,
    time_to,
    typical_compute,
    verdict,
    write,
)

PROBE = {"swap_cross": 2.8, "swap_node": 0.2, "allreduce_all": 2.0, "allreduce_node": 0.1}


def test_methods_run_the_references_then_each_averaging_method_at_its_periods():
    got = methods([10, 50], [10])
    assert list(got) == ["single learner", "ssgd", "adpsgd-random", "ma H=10", "bmuf H=10",
                         "bmuf H=50", "diloco H=10", "diloco H=50", "streaming-diloco H=10",
                         "streaming-diloco H=50", "diloco-async H=10", "diloco-async H=50"]
    assert got["diloco H=50"] == Method("diloco", 50, "none", 4)
    assert got["single learner"] == Method("ssgd", 1, "none", 1)
    assert list(methods([20], [])) == ["single learner", "ssgd", "adpsgd-random", "bmuf H=20",
                                       "diloco H=20", "streaming-diloco H=20",
                                       "diloco-async H=20"]


def test_compressed_rows_are_adpsgd_diloco_and_streaming_at_the_first_period():
    got = methods([10, 50], [], compress="int8")
    assert list(got)[-3:] == ["adpsgd-random int8", "diloco H=10 int8",
                              "streaming-diloco H=10 int8"]
    assert got["streaming-diloco H=10 int8"] == Method("streaming-diloco", 10, "int8", 4)
    with pytest.raises(AsrdistError, match="--compress 'int4': not one of none, "):
        methods([10], [], compress="int4")


def test_only_keeps_the_named_methods_and_names_an_unknown_one():
    assert list(methods([10, 50], [10], ["bmuf H=50", "ssgd"])) == ["ssgd", "bmuf H=50"]
    with pytest.raises(AsrdistError, match="--only 'bmuf H=20': not one of single learner, "):
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


def test_the_new_methods_get_diloco_outer_options_the_codec_and_the_single_learner_the_batch():
    args = parse_args(["--batch", "8", "--diloco-lr", "0.4"])
    outer = {"avg_period": 10, "diloco_lr": 0.4, "diloco_momentum": 0.9}
    stream = {"stream_fragments": 2, "stream_delay": 1, "stream_alpha": 0.0}
    assert config("streaming-diloco", 10, args).options == {**outer, **stream}
    tau3 = parse_args(["--stream-delay", "3", "--stream-fragments", "3", "--stream-alpha", ".5"])
    assert config("streaming-diloco", 6, tau3).options["stream_delay"] == 3
    assert config("streaming-diloco", 6, tau3).options["stream_fragments"] == 3
    assert config("streaming-diloco", 6, tau3).options["stream_alpha"] == 0.5
    assert "stream_delay" not in config("diloco", 6, tau3).options
    assert config("diloco-async", 10, args, "int8").options == {**outer, "compress": "int8"}
    assert config("adpsgd-random", 1, args, "int8").options == {"compress": "int8"}
    assert config("ssgd", 1, args, learners=1).batch == 32  # the 4 learners' 8 each at once
    assert config("ssgd", 1, args).batch == 8


def test_the_exchange_alone_of_the_new_rows_by_hand():
    n = 1024  # int8: 1024 bytes + 4 scales of 4 bytes = 1040 of float32's 4096
    ratio = 1040 / 4096
    assert alone_per_step(Method("streaming-diloco", 10), PROBE, n) == pytest.approx(0.2)
    assert alone_per_step(Method("diloco", 10, "int8"), PROBE, n) == pytest.approx(0.2 * ratio)
    assert alone_per_step(Method("adpsgd-random", 1, "int8"), PROBE, n) == \
        pytest.approx(1.5 * ratio)
    # diloco-async: a push (int8) and a pull (float32) a block of 10, about a swap across
    assert alone_per_step(Method("diloco-async", 10, "int8"), PROBE, n) == \
        pytest.approx(2.8 * (ratio + 1) / 2 / 10)
    assert alone_per_step(Method("ssgd", 1, learners=1), PROBE, n) == 0.0


def _row(label, final_ce, step_s, compute_s, learners=4, rate="100mbit"):
    return {"rate": rate, "label": label, "final_ce": final_ce, "step_s": step_s,
            "compute_s": compute_s, "learners": learners}


def test_the_goal_is_within_two_percent_of_the_single_learner_at_a_step_of_1_1x_compute():
    assert goal(_row("a", 1.53, 0.33, 0.45), 1.50, 0.30) is True  # 1.53 <= 1.53, 0.33 <= 0.33
    assert goal(_row("b", 1.54, 0.30, 0.30), 1.50, 0.30) is False  # CE 2.7 % above
    assert goal(_row("c", 1.40, 0.34, 0.40), 1.50, 0.30) is False  # 1.13x the reference
    assert goal(_row("single", 1.50, 0.30, 0.30, learners=1), 1.50, 0.30) is None
    assert goal(_row("a", 1.53, 0.33, 0.30), None, 0.30) is None


def test_the_reference_compute_is_the_median_of_the_multi_learner_rows_of_the_rate():
    rows = [_row("single", 1.5, 0.4, 0.9, learners=1), _row("a", 1, 1, 0.30),
            _row("b", 1, 1, 0.47), _row("c", 1, 1, 0.34), _row("d", 1, 1, 5.0, rate="1gbit")]
    assert typical_compute(rows, "100mbit") == 0.34  # of 0.30, 0.34, 0.47
    assert typical_compute(rows, "1gbit") == 5.0


def test_the_verdict_names_the_methods_that_meet_it_else_the_nearest_on_each_side():
    single = _row("single learner", 1.50, 0.30, 0.30, learners=1)
    rows = [single, _row("ssgd", 1.50, 2.4, 0.3), _row("bmuf H=50", 2.4, 0.32, 0.30),
            _row("diloco H=50", 2.0, 0.31, 0.30), _row("adpsgd", 1.4, 0.9, 0.3),
            _row("ma", 1.52, 0.6, 0.3),
            _row("spiked", 1.51, 0.45, 0.47)]  # its own compute spiked: 0.45 > 1.1 x 0.30
    (line,) = verdict(rows)
    assert line.endswith("met by none; the best CE at a step <= 1.1x compute is diloco H=50's "
                         "2.000; the fastest step within 2 % is spiked's 450 ms, 1.50x.")
    assert "1.02 x the single learner's 1.500 = 1.530" in line
    assert "the median compute 300 ms = 330 ms" in line
    (line,) = verdict([*rows, _row("streaming", 1.51, 0.32, 0.30)])
    assert line.endswith("met by streaming.")
    assert verdict(rows[1:]) == []  # no single learner: no verdict


@pytest.mark.parametrize("argv, message", [
    (["--steps", "2"], "--steps 2"),
    (["--eval-every", "0"], "--eval-every 0"),
    (["--loopback", "--publish", "R.md"], "--loopback with --publish"),
])
def test_bad_arguments_are_one_line_errors_naming_the_option(argv, message):
    with pytest.raises(AsrdistError, match=message):
        parse_args(argv)


def _learner(compute_s, step_s, final_s, evals=(), final_ce=0.0, done_s=None, sent=None):
    return {"compute_s": compute_s, "step_s": step_s, "final_s": final_s,
            "done_s": final_s if done_s is None else done_s, "evals": list(evals),
            "final_ce": final_ce, "metrics": {} if sent is None else {"sent_bytes": sent}}


def test_summary_of_a_block_method_by_hand():
    # two learners, H = 10, allreduce alone 2.0 s: 0.2 s a step to hide. Steps after the
    # first 2: learner 0 (0.4 + 0.4 + 1.0) / 3 = 0.6, learner 1 (0.5 + 0.5 + 0.8) / 3 = 0.6;
    # compute (0.35 + 0.45) / 2 = 0.4; wait 0.2: nothing hidden; 2 learners / 0.6 s.
    results = [_learner(0.35, [9.0, 9.0, 0.4, 0.4, 1.0], 7.0,
                        [(0.0, 0, 3.5), (4.0, 5, 2.0)], final_ce=1.8, done_s=4.5,
                        sent=3_000_000),
               _learner(0.45, [9.0, 9.0, 0.5, 0.5, 0.8], 7.5, done_s=5.0, sent=1_000_000)]
    s = summarise("bmuf H=10", Method("bmuf", 10), results, PROBE, 1024)
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
    assert s["sent_mb"] == pytest.approx(2.0)  # (3 + 1) / 2 MB


def test_summary_of_a_swap_method_by_hand():
    # adpsgd: alone (2.8 + 0.2) / 2 = 1.5 s; steps 0.7 and 0.5 (mean 0.6), compute 0.4 and
    # 0.2 (mean 0.3): waits 0.3, hides 80 %. Learner 0 ends at 4 s, learner 1 at 16 s: the
    # mean pace is 2 / 0.6 steps/s, the run 8 steps in 16 s.
    results = [_learner(0.4, [0.7, 0.7, 0.7, 0.7], 4.5, done_s=4.0),
               _learner(0.2, [0.5, 0.5, 0.5, 0.5], 16.5, done_s=16.0)]
    s = summarise("adpsgd-random", Method("adpsgd-random", 1), results, PROBE, 1024)
    assert s["hidden"] == pytest.approx(0.8)
    assert s["steps_s"] == pytest.approx(2 / 0.6)
    assert s["run_steps_s"] == pytest.approx(0.5)
    assert s["sent_mb"] is None  # no count from a learner: none in the table


def test_time_to_is_the_first_point_at_or_below_the_target():
    curve = [(0.0, 3.5), (4.0, 2.0), (9.0, 1.5), (12.0, 1.6)]
    assert time_to(curve, 2.0) == 4.0
    assert time_to(curve, 1.55) == 9.0
    assert time_to(curve, 1.4) is None


def test_a_run_log_gives_back_its_probes_and_rows():
    log = "\n".join([
        "[W socket.cpp] noise",
        '-- 100mbit: {"swap_cross": 2.7, "allreduce_all": 2.2}',
        "   ssgd: step 2406 ms, final CE 1.460 at 484 s",
        '   row {"label": "ssgd", "final_ce": 1.46, "curve": [[0.0, 3.4]]}',
        '   row {"label": "ma H=10", "final_ce": 1.75, "curve": []}',
    ])
    probes, rows = from_log(log)
    assert probes == {"100mbit": {"swap_cross": 2.7, "allreduce_all": 2.2}}
    assert [r["label"] for r in rows] == ["ssgd", "ma H=10"]
    assert rows[0]["curve"] == [[0.0, 3.4]]
    with pytest.raises(AsrdistError, match="--from-log: no"):
        from_log("-- 100mbit: {}")


def test_a_run_is_written_only_where_published_with_its_own_figure(tmp_path, capsys):
    """--publish FILE puts the section, its JSON and its figure beside FILE, the figure's link
    and the command naming them; a run not published writes no file (the published study's
    JSON and figure stay as they were)."""
    row = {"rate": "100mbit", "load": 1.0, "label": "streaming-diloco H=6 int8",
           "algo": "streaming-diloco", "period": 6, "compress": "int8", "learners": 4,
           "compute_s": 0.35, "step_s": 0.37, "wait_s": 0.02, "alone_s": 0.1, "hidden": 0.8,
           "steps_s": 10.8, "sent_mb": 236.5, "done_s": 75.0, "run_steps_s": 10.7,
           "final_s": 76.0, "final_ce": 1.33, "curve": [[0.0, 3.4], [76.0, 1.33]],
           "steps_curve": [[0, 3.4]]}
    probes = {"100mbit": {"swap_cross": 2.7, "swap_node": 0.02, "allreduce_all": 2.2}}
    published = [generated(outer_network.__file__, suffix) for suffix in (".json", ".png")]
    before = [p.stat().st_mtime_ns for p in published]
    write(parse_args(["--stream-delay", "3"]), [row], probes, 1024)
    assert [p.stat().st_mtime_ns for p in published] == before
    target = tmp_path / "goal.md"
    write(parse_args(["--stream-delay", "3", "--publish", str(target)]), [row], probes, 1024)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["goal.json", "goal.md", "goal.png"]
    text = target.read_text()
    assert "](goal.png)" in text and "tau = 3 steps" in text
    assert "--stream-delay 3" in text and "--publish FILE" in text  # a scratch path: FILE
    assert str(tmp_path) not in (tmp_path / "goal.json").read_text()
