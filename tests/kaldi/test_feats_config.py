"""feats_config.json: written atomically, read back, and compared so a model refuses features
made otherwise."""

from __future__ import annotations

import pytest

from asrdist.errors import AsrdistError
from asrdist.kaldi.feats_config import (
    check_feats_config,
    differences,
    read_feats_config,
    write_feats_config,
)

FBANK_16K = {"kind": "fbank", "sampling_rate": 16000, "frame_length": 0.025,
             "frame_shift": 0.01, "num_filters": 40, "high_freq": -400.0, "device": "cpu"}


def test_written_and_read_back(tmp_path):
    path = write_feats_config(tmp_path, FBANK_16K)
    assert path == tmp_path / "feats_config.json"
    assert read_feats_config(tmp_path) == FBANK_16K
    assert not list(tmp_path.glob(".*.tmp"))  # no temp file left beside it
    assert read_feats_config(tmp_path / "elsewhere") is None


def test_unreadable_config_is_one_line_naming_it(tmp_path):
    (tmp_path / "feats_config.json").write_text("{not json")
    with pytest.raises(AsrdistError, match="feats_config.json: not a readable features"):
        read_feats_config(tmp_path)
    (tmp_path / "feats_config.json").write_text("[1, 2]")
    with pytest.raises(AsrdistError, match="not a features configuration"):
        read_feats_config(tmp_path)


def test_8khz_features_for_a_16khz_model_are_refused_naming_both(tmp_path):
    """8 kHz features of the model's dimension decoded to words with exit status 0: refused,
    in one line naming the features dir's file, the model and the setting."""
    write_feats_config(tmp_path, {**FBANK_16K, "sampling_rate": 8000})
    with pytest.raises(AsrdistError) as caught:
        check_feats_config(FBANK_16K, "exp/dnn/final.pt", tmp_path)
    message = caught.value.message
    assert message.startswith(f"{tmp_path / 'feats_config.json'}: these features do not match "
                              "those exp/dnn/final.pt was trained on: sampling_rate 8000 "
                              "(the model's 16000)")
    assert "\n" not in message


def test_same_features_pass_and_where_they_were_computed_does_not_count(tmp_path):
    write_feats_config(tmp_path, {**FBANK_16K, "device": "cuda"})
    check_feats_config(FBANK_16K, "final.pt", tmp_path)


def test_nothing_recorded_on_either_side_passes_unchecked(tmp_path):
    check_feats_config(FBANK_16K, "final.pt", tmp_path)  # features from elsewhere
    write_feats_config(tmp_path, {**FBANK_16K, "sampling_rate": 8000})
    check_feats_config(None, "old.pt", tmp_path)  # a model from before the record


def test_a_config_without_kind_is_told_by_its_cepstra():
    """feats_config.json from before ``kind`` was written: MFCC is the one with num_ceps."""
    old_mfcc = {"sampling_rate": 16000, "num_filters": 23, "num_ceps": 13}
    assert differences({**old_mfcc, "kind": "mfcc"}, old_mfcc) == []
    assert differences({"kind": "fbank", "sampling_rate": 16000}, old_mfcc) == [
        "kind 'mfcc' (the model's 'fbank')"]
