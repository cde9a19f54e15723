"""Adding an option is one edit: declared here, in a test module, it is a flag of asrdist-train
and asrdist-simulate, a config.yaml key and a line of both commands' --help, with no other
change anywhere.

The first option is a strategy's (the registry is the house's one door for options from
outside asrdist). The second is a component's, the optimizer's: declared with the one line
below in ``OptimizerOptions`` (asrdist/optim/build.py) of a copy of the package, it is a flag of
both commands, a key of config.yaml, a line of both --help and a field of the simulator's
RunSpec, with no other edit: asrdist-train's config, RunSpec and asrdist-simulate's flags all
hold or derive from the component (the flattener, :func:`asrdist.options.paths`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import asrdist
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


# the one edit: a line of the optimizer's options object, after the anchor line
ANCHOR = '    momentum: float = option(0.9, "SGD momentum", check=NON_NEGATIVE)\n'
DECLARATION = ('    probe_decay: float = option(0.25, "probe: decay of the probe", '
               'check=NON_NEGATIVE)\n')

# run in a fresh interpreter on the edited copy: the commands parse the new flag, the configs
# and the spec hold it, the YAML keeps it
CHILD = """
import json, sys
import yaml
from click.testing import CliRunner
from asrdist.cli import simulate, train
from asrdist.cli.options import given_or_default
from asrdist.options import make
from asrdist.simulate.experiment import RunSpec
from asrdist.train.config import make_config, save_config

here, yaml_path = sys.argv[1], sys.argv[2]
out = {"help": [CliRunner().invoke(c, ["--help"], terminal_width=200).output
                for c in (train.main, simulate.main)]}
flags = train.main.make_context("t", ["--data", here, "--targets", here, "--out", here,
                                      "--probe-decay", "0.5"]).params
config = make_config(None, {k: v for k, v in flags.items() if v is not None and k != "config_path"})
save_config(config, yaml_path)
saved = yaml.safe_load(open(yaml_path))["probe_decay"]
out["train"] = [config.optim.probe_decay, config.probe_decay, saved,
                make_config(yaml_path).optim.probe_decay]
flags = simulate.main.make_context("s", ["--data", here, "--targets", here, "--out", "x.json",
                                         "--probe-decay", "0.75"]).params
values = given_or_default(simulate.option_fields(), flags)
out["simulate"] = [make(RunSpec, values, algo="ssgd").optim.probe_decay,
                   RunSpec(algo="ssgd").optim.probe_decay]
print(json.dumps(out))
"""


def test_an_option_declared_on_a_component_reaches_both_clis_the_yaml_help_and_the_spec(
        tmp_path):
    package = Path(asrdist.__file__).parent
    copy = tmp_path / "src" / "asrdist"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    build = copy / "optim" / "build.py"
    text = build.read_text()
    assert text.count(ANCHOR) == 1  # a line of OptimizerOptions, after which the new one goes
    build.write_text(text.replace(ANCHOR, ANCHOR + DECLARATION))
    env = {**os.environ, "PYTHONPATH": str(copy.parent)}
    res = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), str(tmp_path / "c.yaml")],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    for text in out["help"]:
        assert "--probe-decay FLOAT" in text and "probe: decay of the probe [default: 0.25]" \
            in text
    assert out["train"] == [0.5, 0.5, 0.5, 0.5]  # config, by flat name, config.yaml, read back
    assert out["simulate"] == [0.75, 0.25]  # the flag into RunSpec; its default there
    # and this tree is untouched: the option exists only in the copy
    assert "probe_decay" not in train.main.params and "probe-decay" not in _help(train.main)
