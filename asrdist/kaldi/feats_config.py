"""``feats_config.json``: what made a features dir's vectors, so that a model refuses others.

A feature vector is only comparable to one made the same way: 8 kHz fbank fed to a 16 kHz
model has the model's dimension, and decodes to words with exit status 0. asrdist-features
writes the extractor's whole configuration (kind, sample rate, mel bins, cepstra, framing,
frequency range) beside feats.scp; asrdist-train carries it into final.pt; asrdist-decode and
asrdist-compute-loglikes refuse features whose configuration differs from the model's, in one
line naming both.

asrdist-join-feats copies SRC's record: it says how the first columns were made, and the
joined dir's feats_layout (checked too) says what was pasted on.

A features dir or a model without one (made before it was recorded, or by Kaldi's own tools)
passes unchecked and without a warning: nothing was recorded to compare, and a warning on every
decode of such a dir would say nothing new.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write

FEATS_CONFIG = "feats_config.json"
# where the extractor ran, not what it computed
NOT_THE_FEATURES = ("device",)


def write_feats_config(data_dir: str | os.PathLike, config: dict[str, Any]) -> Path:
    """Write ``config`` (plain JSON values) as ``data_dir``'s feats_config.json, atomically."""
    path = Path(data_dir) / FEATS_CONFIG
    with atomic_write(path) as f:
        json.dump(config, f, indent=1)
    return path


def read_feats_config(data_dir: str | os.PathLike) -> dict[str, Any] | None:
    """``data_dir``'s feats_config.json, or None when it has none; an unreadable one is an
    error naming it."""
    path = Path(data_dir) / FEATS_CONFIG
    try:
        config = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise AsrdistError(f"{path}: not a readable features configuration ({e})") from e
    if not isinstance(config, dict):
        raise AsrdistError(f"{path}: not a features configuration (a JSON object)")
    return config


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` without what does not change the vectors, with its kind (files from before
    ``kind`` was written: MFCC's configuration is the one with cepstra)."""
    kind = config.get("kind", "mfcc" if "num_ceps" in config else "fbank")
    return {"kind": kind, **{k: v for k, v in config.items() if k not in NOT_THE_FEATURES}}


def differences(model: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """One phrase (the setting, ``here``'s value, the model's) for each setting that both
    configurations have and disagree on."""
    model, here = _comparable(model), _comparable(here)
    return [f"{k} {here[k]!r} (the model's {model[k]!r})"
            for k in model if k in here and here[k] != model[k]]


def check_feats_config(recorded: dict[str, Any] | None, model: str | os.PathLike,
                       data_dir: str | os.PathLike) -> None:
    """Refuse ``data_dir``'s features when their configuration differs from ``recorded``, the
    one ``model`` was trained on; unchecked when either side recorded none (see above)."""
    here = read_feats_config(data_dir)
    if recorded is None or here is None:
        return
    wrong = differences(recorded, here)
    if wrong:
        raise AsrdistError(
            f"{Path(data_dir) / FEATS_CONFIG}: these features do not match those {model} was "
            f"trained on: {', '.join(wrong)}; make them with the training features' options")
