"""asrdist-compare's strategies and scenarios as written on its command line."""

from __future__ import annotations

import pytest

from asrdist.errors import AsrdistError
from asrdist.simulate.grid import Scenario, check_learners, parse_arm, parse_scenario


def test_a_strategy_with_its_options_typed():
    arm = parse_arm("ma:avg_period=3")
    assert (arm.label, arm.algo, arm.options) == ("ma:avg_period=3", "ma", {"avg_period": 3})
    assert parse_arm("ssgd").options == {}
    assert parse_arm("bmuf:bmuf_nesterov=false").options == {"bmuf_nesterov": False}
    assert parse_arm("diloco-async:async_follow_speed=True").options == {
        "async_follow_speed": True}


@pytest.mark.parametrize(("text", "message"), [
    ("nosuch", "--algo 'nosuch': unknown --algo"),
    ("ma:avg_every=3", "'avg_every=3': expected OPTION=VALUE, OPTION one of"),
    ("ma:avg_period", "'avg_period': expected OPTION=VALUE"),
    ("ma:avg_period=often", "'often' is not a valid int"),
    ("bmuf:bmuf_nesterov=maybe", "'maybe' is not a valid bool"),
])
def test_a_bad_strategy_is_one_line(text, message):
    with pytest.raises(AsrdistError, match=message):
        parse_arm(text)


def test_scenarios_name_their_stragglers():
    assert parse_scenario("none") == Scenario("none", {})
    assert parse_scenario("straggler:1x3").slow == {1: 3.0}
    assert parse_scenario("straggler:1x3,5x2.5").slow == {1: 3.0, 5: 2.5}


def test_a_lost_learner_alone_or_beside_stragglers():
    assert parse_scenario("lost:5@0.5") == Scenario("lost:5@0.5", {}, {5: 0.5})
    both = parse_scenario("straggler:0x4+lost:5@0.5,6@.25")
    assert (both.slow, both.lost) == ({0: 4.0}, {5: 0.5, 6: 0.25})
    assert parse_scenario("lost:1@0.9+straggler:2x2").slow == {2: 2.0}


@pytest.mark.parametrize("text", ["fast", "straggler:1:3", "straggler:", "straggler:1x0.5",
                                  "straggler:1x3,1x2", "straggler:ax3", "lost:5", "lost:5@1",
                                  "lost:5@0", "lost:5@1.5", "lost:5@-0.5", "lost:5@0.5,5@0.2",
                                  "lost:5@0.5+lost:6@0.5", "straggler:1x3+", "none+lost:1@0.5"])
def test_a_bad_scenario_is_one_line(text):
    with pytest.raises(AsrdistError, match="--scenario"):
        parse_scenario(text)


def test_a_straggler_beyond_the_learners_is_refused():
    check_learners([parse_scenario("straggler:3x2")], 4)
    with pytest.raises(AsrdistError, match="no learner 4 among 4"):
        check_learners([parse_scenario("straggler:4x2")], 4)
    with pytest.raises(AsrdistError, match="straggler:1x2\\+lost:7@0.5: there is no learner 7"):
        check_learners([parse_scenario("straggler:1x2+lost:7@0.5")], 4)


def test_a_lost_fraction_outside_the_run_says_so():
    with pytest.raises(AsrdistError, match="FRACTION of its steps is in \\(0, 1\\)"):
        parse_scenario("lost:5@1.5")
