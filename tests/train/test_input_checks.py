"""Bad input fails before training starts, naming the utterance (a sampled check)."""

from __future__ import annotations

import pytest

from asrdist.errors import AsrdistError
from asrdist.parallel.strategy import Single
from asrdist.testing import make_corpus
from asrdist.train.config import make_config
from asrdist.train.trainer import train


@pytest.mark.parametrize("fault", ["missing ark", "bad offset"])
def test_unreadable_features_fail_before_the_first_step(tmp_path, fault):
    data, targets = make_corpus(tmp_path / "corpus", num_utts=30)
    scp = (data / "feats.scp").read_text().splitlines()
    utt, rx = scp[15].split()
    ark, offset = rx.rsplit(":", 1)
    scp[15] = f"{utt} {tmp_path / 'gone.ark'}:{offset}" if fault == "missing ark" \
        else f"{utt} {ark}:{int(offset) + 5}"
    (data / "feats.scp").write_text("\n".join(scp) + "\n")
    out = tmp_path / "run"
    config = make_config(None, {"data": str(data), "targets": str(targets), "out": str(out),
                                "layers": 1, "units": 8, "heldout_utts": 0, "epochs": 1})
    with pytest.raises(AsrdistError, match=f"utterance {utt}: cannot read features"):
        train(config, Single())
    assert not (out / "metrics.jsonl").exists()  # before any training
