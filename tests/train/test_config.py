"""Options: defaults < YAML < flags, and one clear error per bad value."""

from __future__ import annotations

import pytest

from asrdist.errors import AsrdistError
from asrdist.train.config import make_config, save_config

REQUIRED = {"data": "d", "targets": "t", "out": "o"}


def test_flags_override_the_file_and_the_file_overrides_defaults(tmp_path):
    conf = tmp_path / "c.yaml"
    conf.write_text("chunk-len: 30\nlr: 1e-3\nbatch_size: 64\nalgo_options: {avg_period: 4}\n")
    cfg = make_config(conf, {**REQUIRED, "batch_size": 32, "algo_options": {"x": 1}})
    assert (cfg.chunk_len, cfg.lr, cfg.batch_size) == (30, 0.001, 32)
    assert cfg.algo_options == {"avg_period": 4, "x": 1}
    assert cfg.epochs == 10  # default


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
