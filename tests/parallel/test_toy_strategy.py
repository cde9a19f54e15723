"""A strategy from outside asrdist: one module (this one) and one register() call, then trained
by 2 learners through the real asrdist-train, its option given as a flag. It talks to the
other learners only through its transport (``self.comm``), so the simulator runs it too
(tests/simulate/test_run.py), with no change anywhere else.

The learners are separate processes started like torchrun's workers; they find the strategy
through ``ASRDIST_STRATEGIES`` (they import this module). conftest imports it too, so the
registry-driven tests of test_strategies (one learner, lr = 0) cover the toy as well.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from click.testing import CliRunner

from asrdist.options import Options
from asrdist.parallel.base import DistributedStrategy
from asrdist.parallel.options import option, require
from asrdist.parallel.registry import PLUGINS_ENV, StrategySpec, register
from asrdist.parallel.strategy import Learner

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ToyOptions(Options):
    toy_every: int = option(2, "toy: steps between weight averages")

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.toy_every >= 1, "toy_every", self.toy_every, "be positive")


class ToyAveraging(DistributedStrategy):
    """Average all weights every ``toy_every`` steps; counts its hook calls for the test."""

    name = "toy-average"

    def __init__(self, learner: Learner, options: ToyOptions) -> None:
        super().__init__(learner)
        self.every = options.toy_every
        self.calls: Counter[str] = Counter()

    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        self.calls["wrap_model"] += 1
        return model

    def before_step(self, model: torch.nn.Module, step: int) -> None:
        self.calls["before_step"] += 1

    def after_backward(self, model: torch.nn.Module, step: int) -> None:
        self.calls["after_backward"] += 1

    def after_step(self, model: torch.nn.Module, step: int) -> None:
        self.calls["after_step"] += 1
        if (step + 1) % self.every == 0 and self.multi:
            self.comm.average_(list(model.parameters()))
            self.calls["averages"] += 1

    def sync(self, model: torch.nn.Module) -> None:
        self.calls["sync"] += 1

    def lockstep(self) -> tuple[tuple[int, ...], int]:
        return tuple(range(self.world_size)), self.every

    def metrics(self) -> dict[str, Any]:
        return {"toy_every": self.every, **{f"toy_{k}": v for k, v in self.calls.items()}}

    def state_dict(self) -> dict[str, Any]:
        return {"calls": dict(self.calls)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.calls = Counter(state["calls"])


register(StrategySpec("toy-average", ToyAveraging, ToyOptions,
                      "(tests only) average all weights every --toy-every steps"))


def test_toy_strategy_brings_its_flag_and_checks_it():
    from asrdist.cli.train import main

    assert "--toy-every" in CliRunner().invoke(main, ["--help"]).output
    result = CliRunner().invoke(main, ["--data", "d", "--targets", "t", "--out", "o",
                                       "--toy-every", "0"])
    assert result.exit_code == 1 and "--toy-every must be positive, got 0" in result.output


def test_two_learners_train_with_a_strategy_registered_outside_asrdist(tmp_path):
    from asrdist.parallel.launch.rendezvous import free_port
    from asrdist.testing import make_corpus
    from asrdist.train.metrics import metrics_path, read_metrics

    data, targets = make_corpus(tmp_path / "corpus", num_utts=16)
    out = tmp_path / "run"
    args = ["--data", str(data), "--targets", str(targets), "--out", str(out),
            "--algo", "toy-average", "--toy-every", "3", "--layers=1", "--units=8",
            "--chunk-len=10", "--batch-size=4", "--shuffle-buffer=16", "--heldout-utts=2",
            "--lr-ref-batch=8", "--log-every=1", "--epochs=2", "--exchange-timeout=60"]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "PMI_", "OMPI_", "MASTER_", "RANK", "WORLD_SIZE"))}
    env |= {PLUGINS_ENV: __name__, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    train = [sys.executable, "-m", "asrdist.cli.train"]
    procs = [subprocess.Popen([*train, *args], env=env | {"RANK": str(r), "LOCAL_RANK": str(r)},
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    errs = [p.communicate(timeout=240)[1] for p in procs]
    for p, err in zip(procs, errs, strict=True):
        assert p.returncode == 0, err[-4000:]
    assert (out / "final.pt").is_file()
    assert yaml.safe_load((out / "config.yaml").read_text())["toy_every"] == 3
    for rank in range(2):
        records = read_metrics(metrics_path(out, rank))
        last = [r for r in records if r["kind"] == "train"][-1]
        steps = last["step"]
        assert steps > 6 and last["toy_every"] == 3  # the flag reached the strategy
        assert last["toy_wrap_model"] == 1
        assert last["toy_before_step"] == last["toy_after_backward"] == steps
        assert last["toy_after_step"] == steps and last["toy_averages"] == steps // 3
        heldout = [r for r in records if r["kind"] == "heldout"]
        assert heldout and all(r["toy_sync"] >= 1 for r in heldout)

