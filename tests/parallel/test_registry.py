"""The registry is the one source of the --algo names, their options and the README's table."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel import registry
from asrdist.parallel.registry import StrategySpec, make_strategy
from asrdist.train.interval import Interval

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_algo_table_is_the_registry_s():
    builtin = [n for n, s in registry.specs().items() if s.make.__module__.startswith("asrdist.")]
    assert registry.algo_table(builtin) in README.read_text()


def test_unknown_and_bad_options_are_errors():
    with pytest.raises(ValueError, match="unknown option.*avg_period; ssgd takes"):
        make_strategy("ssgd", avg_period=3)
    with pytest.raises(ValueError, match="unknown --algo 'nope'"):
        make_strategy("nope")
    with pytest.raises(AsrdistError, match="--avg-period must be positive, got 0"):
        make_strategy("ma", avg_period=0)
    with pytest.raises(AsrdistError, match="--avg-frames must not be negative, got -1"):
        make_strategy("ma", avg_frames=-1)


def test_an_option_two_strategies_declare_differently_is_refused():
    from dataclasses import dataclass

    from asrdist.parallel.options import option

    @dataclass(frozen=True)
    class Clash:
        avg_period: int = option(3, "another default")

    with pytest.raises(ValueError, match="option avg_period differs"):
        registry.register(StrategySpec("clash", lambda learner, o: None, Clash))  # type: ignore
    assert "clash" not in registry.algo_names()


def test_interval_round_trips_through_a_checkpoint():
    iv = Interval.start(torch.device("cpu"))
    iv.add(torch.tensor(0.5), 10, 0, 0.1, 0.2)
    iv.add(torch.tensor(float("inf")), 4, 1, 0.0, 0.1)
    iv.add(torch.tensor(float("nan")), 3, 2, 0.0, 0.1)
    back = Interval.from_state(iv.state_dict(), torch.device("cpu"))
    assert (back.frames, back.steps) == (17, 3) and back.non_finite() == (1, float("inf"))
    assert back.state_dict().keys() == iv.state_dict().keys()
    ok = Interval.start(torch.device("cpu"))
    ok.add(torch.tensor(0.5), 10, 0, 0.0, 0.0)
    ok.add(torch.tensor(1.0), 30, 1, 0.0, 0.0)
    assert ok.non_finite() is None and ok.mean_loss() == pytest.approx(35 / 40)
