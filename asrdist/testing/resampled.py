"""A model and features that do not belong together: a tiny model trained on 16 kHz features,
and the same features' dir claiming 8 kHz (as if made with ``--sample-rate 8000``), for the
checks that decoding refuses them. The test suite and the probes (bench/probes/audio.py) share
them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from asrdist.cli.train import main as train_main
from asrdist.testing.planted import invoke, train_args

FEATS_CONFIG = "feats_config.json"


def trained_model(root: Path) -> tuple[Path, Path]:
    """A tiny model trained (two steps) on a corpus made under ``root``: its final.pt and the
    features dir it was trained on (16 kHz MFCCs by their feats_config.json)."""
    trained = invoke(train_main, *train_args(root), "--max-steps=2")
    if trained.exit_code != 0:
        raise RuntimeError(f"the tiny run failed: {trained.output[-2000:]}")
    return root / "run" / "final.pt", root / "corpus" / "data"


def with_sample_rate(data: Path, dest: Path, rate: int) -> Path:
    """A copy of features dir ``data`` at ``dest`` whose feats_config.json says ``rate`` Hz
    (the vectors, and so their dimension, unchanged: only the record tells them apart)."""
    shutil.copytree(data, dest)
    config = json.loads((dest / FEATS_CONFIG).read_text())
    (dest / FEATS_CONFIG).write_text(json.dumps({**config, "sampling_rate": rate}))
    return dest
