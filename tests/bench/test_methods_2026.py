from pathlib import Path

import pytest

from asrdist.errors import AsrdistError
from bench.studies.methods_2026 import LOST, command, loss_cost, parse_args, split, strategies


def test_every_strategy_comes_plain_then_compressed_with_its_own_options_kept():
    got = strategies(16, "int8")
    assert got[:4] == ["ssgd", "ssgd:compress=int8", "adpsgd-random",
                       "adpsgd-random:compress=int8"]
    assert "bmuf:bmuf_momentum=0.5,bmuf_lr=0.0833,compress=int8" in got
    assert got[-1] == "diloco-async:diloco_lr=0.35,compress=int8"
    assert len(got) == 14
    few = strategies(64, "int8", every=False)
    assert few == ["ssgd", "adpsgd-random", "hadpsgd", "bmuf:bmuf_momentum=0.5,bmuf_lr=0.0208",
                   "diloco", "diloco:compress=int8", "streaming-diloco",
                   "streaming-diloco:compress=int8", "diloco-async:diloco_lr=0.35",
                   "diloco-async:diloco_lr=0.35,compress=int8"]


def test_a_grid_splits_the_global_batch_of_256_and_its_compute_over_its_learners():
    argv = command("64", "D", "T", Path("OUT"), 1, "int8")
    at = {flag: argv[i + 1] for i, flag in enumerate(argv) if flag.startswith("--")}
    assert at["--batch-size"] == "4"  # 256 / 64
    assert at["--compute-s"] == "0.0125"  # 4 chunks at 0.05 s per 16
    assert at["--out"] == "OUT/64"
    assert "bmuf:bmuf_momentum=0.5,bmuf_lr=0.0208" in argv  # 0.0833 x 16/64, 3 digits
    assert argv.count("--scenario") == 2 and "straggler:0x4" in argv
    k1 = command("k1", "D", "T", Path("OUT"), 3, "int8")
    assert k1[k1.index("--batch-size") + 1] == "256"
    assert k1[k1.index("--compute-s") + 1] == "0.8"
    assert [k1[i + 1] for i, f in enumerate(k1) if f == "--algo"] == ["ssgd", "diloco"]


def test_the_lost_grids_run_the_loss_beside_its_reference_on_the_plain_grids_axes():
    argv = command("16lost", "D", "T", Path("OUT"), 1, "int8")
    values = {f: [argv[i + 1] for i, g in enumerate(argv) if g == f]
              for f in ("--scenario", "--algo", "--target-ce", "--budget", "--learners")}
    assert values["--scenario"] == ["straggler:0x4+lost:5@0.5", "straggler:0x4"]
    assert len(values["--algo"]) == 14 and values["--learners"] == ["16"]
    assert (values["--target-ce"], values["--budget"]) == (["2.431"], ["4.09", "8.18", "16.4"])
    wide = command("64lost", "D", "T", Path("OUT"), 1, "int8")
    algos = [wide[i + 1] for i, g in enumerate(wide) if g == "--algo"]
    plain = ["ssgd", "adpsgd-random", "hadpsgd", "bmuf:bmuf_momentum=0.5,bmuf_lr=0.0208",
             "diloco", "streaming-diloco", "diloco-async:diloco_lr=0.35"]
    assert algos[::2] == plain  # each then compressed: the rows the plain 64 grid leaves out
    assert algos[1::2] == [a + (",compress=int8" if ":" in a else ":compress=int8") for a in plain]
    assert wide[wide.index("--target-ce") + 1] == "2.436"


def test_the_loss_cost_by_hand():
    rows = [{"strategy": "a", "scenario": LOST, "final_ce": 2.5, "failed": 0,
             "end_time_s": 30.0, "time_to_target_s": 25.0},
            {"strategy": "a", "scenario": "straggler:0x4", "final_ce": 2.4, "failed": 0,
             "end_time_s": 31.0, "time_to_target_s": None},
            {"strategy": "s", "scenario": LOST, "final_ce": None, "failed": 1,
             "failed_at_s": 18.0, "end_time_s": 18.0},
            {"strategy": "s", "scenario": "straggler:0x4", "final_ce": 2.3, "failed": 0,
             "end_time_s": 40.0}]
    assert loss_cost(rows) == [
        "- a: final CE 2.5000 against 2.4000 without the loss (+0.1000), time to target 25 s "
        "against never, ending at 30 s against 31 s",
        "- s: failed at 18 s (without the loss: final CE 2.3000 at 40 s)"]


def _row(algo, ce, scenario="none"):
    return {"strategy": algo, "scenario": scenario, "final_ce": ce}


def test_the_k1_split_by_hand():
    k1 = [_row("ssgd", 2.40), _row("diloco", 2.30)]
    multi = [_row("ssgd", 2.38), _row("diloco", 2.19), _row("diloco", 9.0, "straggler:0x4")]
    (line,) = split(k1, multi)
    assert "diloco - ssgd -0.1900" in line  # 2.19 - 2.38
    assert "the outer optimizer alone: -0.1000" in line  # 2.30 - 2.40
    assert "diloco(N) - diloco(1) -0.1100" in line  # 2.19 - 2.30
    assert split(k1[:1], multi) == []


@pytest.mark.parametrize("argv, message", [
    (["--grids", "16", "32", "--seeds", "1", "1"], "--grids '32'"),
    (["--grids", "16", "--seeds", "1", "2"], "--seeds \\[1, 2\\]"),
    (["--grids", "16", "--seeds", "0"], "--seeds \\[0\\]"),
])
def test_bad_arguments_are_one_line_errors_naming_the_option(argv, message):
    with pytest.raises(AsrdistError, match=message):
        parse_args(["--data", "D", "--targets", "T", "--out", "O", *argv])
