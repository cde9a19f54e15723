"""recipes/mini/run.sh --setup suchen: RBM pretraining under 2 learners, then the sigmoid DNN
with NG-SGD and model averaging, decoded and scored like the BLSTMs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from asrdist.models.build import load_final
from asrdist.train.metrics import read_metrics

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "mini"


def _path_with_console_scripts(tmp_path: Path) -> str:
    """PATH with this interpreter's scripts, and asrdist-pretrain-rbm when the virtualenv was
    installed before that script existed (it runs the same module)."""
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    if shutil.which("asrdist-pretrain-rbm", path=path) is None:
        shim = tmp_path / "bin" / "asrdist-pretrain-rbm"
        shim.parent.mkdir()
        shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m asrdist.cli.pretrain_rbm "$@"\n')
        shim.chmod(0o755)
        path = f"{shim.parent}:{path}"
    return path


def test_suchen_setup_pretrains_trains_with_ngsgd_and_ma_and_scores(tmp_path):
    env = dict(os.environ, PATH=_path_with_console_scripts(tmp_path))
    args = [str(RECIPE / "run.sh"), "--data", str(tmp_path / "data"), "--exp",
            str(tmp_path / "exp"), "--hours", "0.1", "--test-hours", "0.004", "--setup",
            "suchen", "--learners", "2",
            "--pretrain-opts", "--hidden-layers 2 --hidden-units 16 --batch-size 8",
            "--train-opts", "--hidden-layers 2 --hidden-units 16 --epochs 1 --batch-size 8 "
                            "--heldout-utts 3 --avg-frames 256"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    exp = tmp_path / "exp"
    assert (exp / "dbn" / "dbn.pt").is_file()
    run = exp / "dnn_suchen_ma"
    model, record = load_final(run / "final.pt")
    assert record["algo"] == "ma" and record["world_size"] == 2
    assert isinstance(model.net[1], torch.nn.Sigmoid)
    train = [r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "train"]
    assert train[-1]["avg_period"] == 4  # 256 frames / (8 chunks x 8 frames)
    assert train[-1]["averages"] >= 1
    results = (exp / "results.md").read_text()
    assert "| dnn_suchen_ma x2 |" in results
    assert re.search(r"stage 4 \(pretrain rbm x2\): done", done.stderr)
