"""bench.train_throughput: the flags it gives asrdist-train, its equal work, and a tiny run of
the whole bench (its memory part started asrdist-train with flags the CLI refused)."""

from __future__ import annotations

import argparse

import pytest
import torch

from asrdist.cli.train import main as train_cli
from asrdist.train.config import make_config
from bench import train_throughput as bench


def test_train_flags_give_the_cli_the_same_config(tmp_path):
    cfg = bench.run_config(tmp_path / "d", tmp_path / "t", tmp_path / "o", 5, nesterov=True,
                        bmuf_nesterov=False, time_masks=0)
    flags = bench.train_flags(cfg)
    assert "--nesterov" in flags and "--no-bmuf-nesterov" in flags  # a bool takes no value
    assert "--cmvn-norm-vars" in flags and "--feature-masks=2" in flags  # the recipe's
    assert not any(f.startswith("--time-masks") for f in flags)  # the default: left out
    assert not any(f.startswith(("--nesterov=", "--cmvn-norm-vars=")) for f in flags)
    ctx = train_cli.make_context("asrdist-train", list(flags))
    given = {k: v for k, v in ctx.params.items() if v is not None and k != "config_path"}
    assert make_config(None, given).to_dict() == cfg.to_dict()


def test_the_bare_loop_masks_as_the_trainer_does(tmp_path, monkeypatch):
    cfg = bench.run_config(tmp_path / "d", tmp_path / "t", tmp_path / "o", 2, layers=1, units=8)
    batches = [(torch.randn(4, 41, 13) + 3, torch.zeros(4, 21, dtype=torch.long))] * 2
    seen: list[torch.Tensor] = []
    real = bench.build_model

    def spy(*args, **kwargs):
        model = real(*args, **kwargs)
        model.register_forward_pre_hook(lambda _, inputs: seen.append(inputs[0]))
        return model

    monkeypatch.setattr(bench, "build_model", spy)
    bench.bare_loop(cfg, batches, 13, 5)
    assert all(not torch.equal(x, batches[0][0]) for x in seen)  # masked, differently
    assert not torch.equal(seen[0], seen[1])
    seen.clear()
    bench.bare_loop(bench.run_config(tmp_path / "d", tmp_path / "t", tmp_path / "o", 2, layers=1,
                                  units=8, feature_masks=0, time_masks=0), batches, 13, 5)
    assert all(torch.equal(x, batches[0][0]) for x in seen)


CONFORMER_CONF = bench.RECIPE_CONF.with_name("train_conformer.yaml")


@pytest.mark.parametrize(("name", "repeats"), [("blstm", 2), ("conformer", 1)])
def test_the_whole_bench_runs_at_tiny_size(tmp_path, capsys, name, repeats):
    conf = bench.RECIPE_CONF
    if name == "conformer":  # the recipe's Conformer config (AdamW), at a tiny width
        conf = tmp_path / "train_conformer.yaml"
        conf.write_text(CONFORMER_CONF.read_text() + "conformer_blocks: 1\nattention_dim: 16\n")
    args = argparse.Namespace(data=None, targets=None, hours=0.2, dim=13, steps=10,
                              repeats=repeats, config=conf)
    report = "\n".join(bench.run(args, tmp_path))
    assert "recipe's masks, on both sides:" in report and "no masks, on both sides:" in report
    assert "peak RSS, 5 steps    1x corpus" in report
    assert report.count("-step interval: bare") == 2
    assert f"repeat {repeats - 1}, no masks: bare" in capsys.readouterr().out  # as it goes
    assert conf.name in report
