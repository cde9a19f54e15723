"""Options: defaults < YAML < flags, and one clear error per bad value."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from asrdist.cli.train import main as train_main
from asrdist.errors import AsrdistError
from asrdist.parallel import registry
from asrdist.parallel.options import NoOptions, ProcessOptions
from asrdist.parallel.strategies.adpsgd import ADPSGDOptions
from asrdist.testing import make_corpus
from asrdist.testing.planted import invoke
from asrdist.train.config import make_config, save_config
from tests.parallel.cli_learners import TINY_MODEL, join_learners, start_learners

REQUIRED = {"data": "d", "targets": "t", "out": "o"}


def test_flags_override_the_file_and_the_file_overrides_defaults(tmp_path):
    conf = tmp_path / "c.yaml"
    conf.write_text("chunk-len: 30\nlr: 1e-3\nbatch_size: 64\navg_period: 4\n")
    cfg = make_config(conf, {**REQUIRED, "batch_size": 32})
    assert (cfg.chunk_len, cfg.lr, cfg.batch_size, cfg.option("avg_period")) == (30, 0.001, 32, 4)
    assert cfg.epochs == 10  # default


def test_colon_values_stay_strings_not_sexagesimal_numbers(tmp_path):
    conf = tmp_path / "c.yaml"
    conf.write_text("slow_learner: 1:3\nseed: 7\n")
    cfg = make_config(conf, REQUIRED)
    assert (cfg.option("slow_learner"), cfg.seed) == ("1:3", 7)
    save_config(cfg, tmp_path / "config.yaml")
    assert make_config(tmp_path / "config.yaml").option("slow_learner") == "1:3"


def test_each_strategy_gets_only_the_options_it_takes():
    cfg = make_config(None, {**REQUIRED, "avg_period": 2, "seed": 9, "slow_learner": "1:3"})
    options, ignored = cfg.options_for("adpsgd-random")
    assert options == ADPSGDOptions(seed=9)  # the algorithm's alone
    assert cfg.process_options() == ProcessOptions(slow_learner="1:3")  # the transport's
    assert ignored == ["--avg-period 2"]  # defaults and the seed are never reported
    assert cfg.options_for("single") == (NoOptions(), ["--slow-learner 1:3", "--avg-period 2"])


def test_strategy_options_are_yaml_keys_from_the_registry(tmp_path):
    """config.yaml lists every registered strategy's options (one file serves every --algo)."""
    cfg = make_config(None, REQUIRED)
    save_config(cfg, tmp_path / "config.yaml")
    keys = set(yaml.safe_load((tmp_path / "config.yaml").read_text()))
    assert set(registry.option_fields()) <= keys
    assert "strategy_options" not in keys


def test_saved_config_reads_back_identically(tmp_path):
    cfg = make_config(None, {**REQUIRED, "model": "dnn", "cmvn_norm_vars": True})
    save_config(cfg, tmp_path / "config.yaml")
    assert make_config(tmp_path / "config.yaml") == cfg


@pytest.mark.parametrize(("text", "message"), [
    ("batch_size: lots\n", "batch_size: 'lots' is not a valid int"),
    ("lr: fast\n", "lr: 'fast' is not a valid float"),
    ("nesterov: maybe\n", "nesterov: 'maybe' is not a valid bool"),
    ("chunk_length: 21\n", "unknown option 'chunk_length'"),
    ("model: rnn\n", "--model 'rnn': choose one of blstm, dnn"),
    ("batch_size: 0\n", "--batch-size must be positive"),
    ("slow_learner: 1-3\n", "--slow-learner '1-3': expected RANK:FACTOR"),
    ("learners_per_node: -1\n", "--learners-per-node must not be negative"),
    ("distance_every: -1\n", "--distance-every must not be negative"),
    ("hadpsgd_variant: slow\n", "--hadpsgd-variant 'slow': choose one of fixed, random, delay1"),
    ("avg_period: x\n", "avg_period: 'x' is not a valid int"),
    ("[1, 2]\n", "a config file is a mapping"),
    ("lr: [0.1\n", "cannot read config"),
])
def test_unreadable_values_are_named(tmp_path, text, message):
    conf = tmp_path / "c.yaml"
    conf.write_text(text)
    with pytest.raises(AsrdistError, match=message.replace("[", r"\[")):
        make_config(conf, REQUIRED)


def test_missing_required_option():
    with pytest.raises(AsrdistError, match="--targets is required"):
        make_config(None, {"data": "d", "out": "o"})


RECIPE_CONFIGS = sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*/conf/*.yaml"))


@pytest.mark.parametrize("conf", RECIPE_CONFIGS, ids=lambda p: f"{p.parts[-3]}/{p.name}")
def test_the_recipes_configs_are_read_key_for_key(conf):
    written = yaml.safe_load(conf.read_text())
    used = make_config(conf, REQUIRED).to_dict()
    assert {k.replace("-", "_"): v for k, v in written.items()} == {
        k.replace("-", "_"): used[k.replace("-", "_")] for k in written}


def test_powersgd_trains_two_ssgd_learners_through_asrdist_train(tmp_path):
    """The one strategy that takes it (every strategy's options were made from the run's
    values, so the others' refusal refused it for ssgd too)."""
    out = tmp_path / "run"
    procs = start_learners(make_corpus(tmp_path / "corpus"), out, "ssgd", *TINY_MODEL,
                           "--max-steps=3", "--compress=powersgd", "--exchange-timeout=30",
                           "--distance-every=0")
    codes = join_learners(procs, out)
    assert codes == [0, 0], [(out / f"err{r}.txt").read_text()[-2000:] for r in range(2)]
    assert yaml.safe_load((out / "config.yaml").read_text())["compress"] == "powersgd"
    assert (out / "final.pt").is_file()


def test_powersgd_is_refused_in_one_line_for_a_strategy_without_it(tmp_path):
    data, targets = make_corpus(tmp_path / "corpus")
    result = invoke(train_main, "--data", data, "--targets", targets, "--out", tmp_path / "r",
                    "--algo", "ma", "--compress", "powersgd")
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "Error: --compress powersgd: only ssgd takes it (torch's PowerSGD compresses DDP's "
        "gradient buckets)"]
    assert not (tmp_path / "r").exists()
