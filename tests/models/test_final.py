"""final.pt: what the trainer writes is what decoding reads, and a wrong file is one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.models.build import ModelConfig, build_model
from asrdist.models.final import Exported, load_final, write_final


def test_round_trip_keeps_weights_and_everything_decoding_needs(tmp_path):
    config = ModelConfig(type="blstm", layers=1, units=4, chunk_left_context=2,
                         chunk_right_context=3)
    torch.manual_seed(0)
    model = build_model(config, 6, 5)
    exported = Exported(config, input_dim=6, num_pdfs=5, log_priors=np.log(np.full(5, 0.2)),
                        cmvn="spk", cmvn_norm_vars=True, left_context=2, right_context=3,
                        chunk_len=21, steps=7, algo="ssgd", world_size=2)
    write_final(tmp_path / "final.pt", model, exported)
    loaded, back = load_final(tmp_path / "final.pt")
    assert not loaded.training
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert back.model_config == config and back.log_priors.dtype == np.float32
    np.testing.assert_allclose(back.log_priors, np.log(0.2), rtol=1e-6)
    assert (back.cmvn, back.cmvn_norm_vars, back.left_context, back.right_context,
            back.chunk_len, back.steps, back.algo, back.world_size) == (
               "spk", True, 2, 3, 21, 7, "ssgd", 2)
    raw = torch.load(tmp_path / "final.pt", weights_only=True)  # a user can look inside
    assert raw["format"] == "asrdist-final-1" and raw["num_pdfs"] == 5


@pytest.mark.parametrize("content", [b"not a pickle", None])
def test_a_file_that_is_not_a_final_pt_is_one_line_naming_it(tmp_path, content):
    path = tmp_path / "other.pt"
    if content is None:
        torch.save({"step": 3, "model": {}}, path)  # a checkpoint, say
    else:
        path.write_bytes(content)
    with pytest.raises(AsrdistError, match=f"^{path}: not a readable asrdist final.pt "):
        load_final(path)


def test_the_features_configuration_travels_as_plain_data_and_older_files_have_none(tmp_path):
    """final.pt keeps what made its training features (read back with weights_only=True); a
    file from before the record loads with None, which decoding does not check."""
    config = ModelConfig(type="dnn", splice=0, hidden_layers=0)
    made = {"kind": "fbank", "sampling_rate": 16000, "num_filters": 40, "high_freq": -400.0}
    exported = Exported(config, input_dim=4, num_pdfs=3, log_priors=np.zeros(3),
                        feats_config=made)
    path = write_final(tmp_path / "final.pt", build_model(config, 4, 3), exported)
    assert load_final(path)[1].feats_config == made
    record = torch.load(path, weights_only=True)
    del record["feats_config"]
    torch.save(record, path)
    assert load_final(path)[1].feats_config is None
