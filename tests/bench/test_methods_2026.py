from pathlib import Path

import pytest

from asrdist.errors import AsrdistError
from bench.studies.methods_2026 import command, parse_args, split, strategies


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
