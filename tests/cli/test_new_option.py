"""Adding an option is one edit: declared here, in a test module, it is a flag of asrdist-train
and asrdist-simulate, a config.yaml key and a line of both commands' --help, with no other
change anywhere.

The option is a strategy's (the registry is the house's one door for options from outside
asrdist); the flattening that gives a component's options the same way is the one of
:func:`asrdist.options.declared`, tested on a whole of components in tests/test_options.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import yaml
from click.testing import CliRunner

from asrdist.cli import simulate, train
from asrdist.options import POSITIVE, Options, option
from asrdist.parallel import registry
from asrdist.parallel.registry import StrategySpec
from asrdist.parallel.strategy import Single
from asrdist.train.config import make_config, save_config


@dataclass(frozen=True)
class ProbeOptions(Options):
    probe_every: int = option(3, "probe: steps between probes", check=POSITIVE)


@pytest.fixture
def probe_strategy(monkeypatch):
    """The strategy ``probe`` registered for this test only."""
    spec = StrategySpec("probe", lambda learner, options: Single(), ProbeOptions, "a probe")
    monkeypatch.setitem(registry._SPECS, "probe", spec)
    return spec


def _help(command) -> str:
    return CliRunner().invoke(command, ["--help"], terminal_width=200).output


def test_an_option_declared_in_a_test_module_reaches_both_clis_the_yaml_and_help(
        probe_strategy, tmp_path):
    for command in (train.main, simulate.main):
        text = _help(command)
        assert "--probe-every" in text and "probe: steps between probes [default: 3]" in text
    assert "probe_every" in simulate.option_fields()
    config = make_config(None, {"data": "d", "targets": "t", "out": "o", "algo": "probe",
                                "probe_every": "5"})  # a flag's text, typed by its declaration
    assert config.options_for("probe") == (ProbeOptions(5), [])
    save_config(config, tmp_path / "config.yaml")
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["probe_every"] == 5
    assert make_config(tmp_path / "config.yaml").option("probe_every") == 5
