from bench.studies.stragglers_sim import ce_at, progress_rate, scenarios


def test_scenarios_slow_the_last_learner_or_every_eighth():
    got = scenarios(16)
    assert got["none"] == {}
    assert got["1 learner 4x"] == {15: 4.0}
    assert got["2 learners 2x"] == {3: 2.0, 11: 2.0}
    assert len(scenarios(64)["8 learners 4x"]) == 8


RECORDS = [{"time_s": 2.0, "steps": 1, "heldout_ce": 3.0},
           {"time_s": 5.0, "steps": 2, "heldout_ce": 2.5},
           {"time_s": 9.0, "steps": 4, "heldout_ce": 2.0}]


def test_ce_at_takes_the_last_evaluation_not_after_the_time():
    assert ce_at(RECORDS, 4.9) == 3.0
    assert ce_at(RECORDS, 5.0) == 2.5
    assert ce_at(RECORDS, 1.0) == 3.0  # before any: the first


def test_progress_rate_counts_all_learners_until_half_the_steps():
    assert progress_rate(RECORDS, 16) == 2 * 16 / 5.0
