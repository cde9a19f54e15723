import pytest

from bench.studies.outer_methods import methods, speed_model, time_to


def test_methods_give_each_periodic_strategy_its_own_periods():
    got = methods({"ma": [10], "bmuf": [10], "diloco": [10, 200]})
    assert list(got) == ["ssgd", "adpsgd-random", "hadpsgd", "ma H=10", "bmuf H=10",
                         "bmuf H=10 lr/N", "diloco H=10", "diloco H=200"]
    assert got["diloco H=200"] == ("diloco", {"avg_period": 200}, False)
    assert got["bmuf H=10 lr/N"] == ("bmuf", {"avg_period": 10}, True)


def test_a_message_of_the_small_model_lasts_as_long_as_173_mb_over_the_link():
    speed = speed_model(100e6 / 8, 280_000, 16, 21)
    assert speed.compute_s == pytest.approx(16 * 21 * 53e-6)
    # 173 MB at 12.5 MB/s is 13.84 s, plus 0.1 ms of latency
    assert speed.send_s(280_000) == pytest.approx(13.8401)


RECORDS = [{"time_s": 2.0, "heldout_ce": 3.0}, {"time_s": 5.0, "heldout_ce": 2.5},
           {"time_s": 9.0, "heldout_ce": 2.0}]


def test_time_to_is_the_first_evaluation_at_or_below_the_target():
    assert time_to(RECORDS, 2.5) == 5.0
    assert time_to(RECORDS, 2.7) == 5.0
    assert time_to(RECORDS, 3.0) == 2.0
    assert time_to(RECORDS, 1.9) is None
