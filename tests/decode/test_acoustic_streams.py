"""Decoding normalises joined features as training did: each stream as the layout stored in
final.pt says (the i-vector columns untouched); a final.pt from before layouts as before."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from asrdist.decode.acoustic import Chunking, NnetScorer
from asrdist.errors import AsrdistError
from asrdist.kaldi.layout import read_layout
from asrdist.models.build import ModelConfig, build_model
from asrdist.models.final import Exported, write_final
from tests.data.test_stream_norm import EXPECTED, make_joined

CONFIG = ModelConfig(type="dnn", splice=0, hidden_layers=0)


def _identity_model() -> torch.nn.Module:
    """A network whose logits are its input features (4 in, 4 out)."""
    model = build_model(CONFIG, 4, 4)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.net[-1].weight.copy_(torch.eye(4))
    return model


def _exported(**fields) -> Exported:
    return Exported(CONFIG, input_dim=4, num_pdfs=4, log_priors=np.zeros(4, np.float32),
                    cmvn="spk", **fields)


def _scores(final_pt: Path, data: Path) -> dict[str, np.ndarray]:
    scorer = NnetScorer(final_pt, data, Chunking(frames_per_chunk=0))
    return dict(scorer.scores(sorted(EXPECTED)))


def _log_softmax(rows) -> np.ndarray:
    return torch.log_softmax(torch.tensor(rows, dtype=torch.float32), -1).numpy()


def test_decoding_applies_the_layout_from_final_pt(tmp_path):
    data, _ = make_joined(tmp_path)
    final = write_final(tmp_path / "final.pt", _identity_model(),
                        _exported(feats_layout=read_layout(data)))
    (data / "feats_layout").unlink()  # the model's own record decides, not the data dir
    for utt, scores in _scores(final, data).items():
        np.testing.assert_allclose(scores, _log_softmax(EXPECTED[utt]), atol=1e-5)


def test_a_final_pt_without_a_layout_normalises_every_column_as_before(tmp_path, caplog):
    """By hand, speaker A's means over all columns: fbank 4, fMLLR 3, i-vector (1, 0)."""
    data, _ = make_joined(tmp_path)
    final = tmp_path / "old.pt"
    write_final(final, _identity_model(), _exported())
    record = torch.load(final, weights_only=True)
    del record["feats_layout"]
    torch.save(record, final)
    scores = _scores(final, data)["A-1"]
    np.testing.assert_allclose(scores, _log_softmax([[-3, -1, -0.5, -1], [-1, -1, -0.5, -1]]),
                               atol=1e-5)
    assert "old.pt records no feats_layout: every column of" in caplog.text


def test_test_features_joined_otherwise_than_training_are_refused(tmp_path):
    data, _ = make_joined(tmp_path)
    layout = read_layout(data)
    other = (dataclasses.replace(layout[0], norm="utt"), *layout[1:])
    final = write_final(tmp_path / "final.pt", _identity_model(), _exported(feats_layout=other))
    with pytest.raises(AsrdistError, match="feats_layout: 0-1 spk, 1-2 none, 2-4 none, but "
                                           ".*final.pt was trained on 0-1 utt, 1-2 none, 2-4 "
                                           "none; join the test features as the training ones"):
        NnetScorer(final, data)
