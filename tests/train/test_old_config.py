"""A run made before the options were composed (tests/train/fixtures/run_2026_11: its
config.yaml and the options of its done marker, written by asrdist-train at 6febc1a) still
loads, saves back key for key, and has the same identity, so --resume and the skip of a
finished run compare it as before."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from asrdist.train.config import make_config, save_config
from asrdist.train.identity import resume_free, run_options

OLD = Path(__file__).parent / "fixtures" / "run_2026_11"


def _old_yaml() -> dict:
    return yaml.safe_load((OLD / "config.yaml").read_text())


def test_an_old_config_yaml_loads_and_saves_back_the_same_keys_and_values(tmp_path):
    config = make_config(OLD / "config.yaml")
    save_config(config, tmp_path / "config.yaml")
    again = yaml.safe_load((tmp_path / "config.yaml").read_text())
    old = _old_yaml()
    # the same keys and values (a strategy registered by a test module, the toy, brings its
    # key too); their order is now the components' (the optimizer's keys, then NG-SGD's)
    assert {k: again[k] for k in again if k in old} == old


def test_an_old_runs_identity_is_unchanged(monkeypatch):
    monkeypatch.setattr("asrdist.train.identity.resolved", lambda p: p)  # the paths as saved
    config = make_config(OLD / "config.yaml")
    old = json.loads((OLD / "identity.json").read_text())["options"]
    assert run_options(config, 1) == old


def test_the_options_a_resume_may_change_freely_are_unchanged():
    config = make_config(OLD / "config.yaml")
    assert resume_free(config) == {
        "out", "resume", "device", "log_every", "checkpoint_every", "keep_checkpoints",
        "exchange_timeout", "distance_every", "heldout_every", "stop_signals", "resume_allow",
        "noise_scale_every", "discard_finished", "slow_learner", "epochs", "max_steps",
        "bind",  # where the store listens changes nothing a run computes
        "tensorboard", "tensorboard_all"}  # nor where its figures are mirrored
