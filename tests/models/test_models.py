"""BLSTM and DNN acoustic models: shapes, splicing, building from a config."""

from __future__ import annotations

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.models.build import ModelConfig, build_model


def test_blstm_labels_every_input_frame():
    model = build_model(ModelConfig("blstm", layers=2, units=8, bottleneck=4), 13, 7)
    assert (model.left_context, model.right_context) == (0, 0)
    assert model(torch.randn(3, 21, 13)).shape == (3, 21, 7)
    assert model.output.in_features == 4


def test_blstm_chunk_context_frames_are_read_but_not_labelled():
    torch.manual_seed(0)
    model = build_model(ModelConfig("blstm", layers=1, units=4, chunk_left_context=3,
                                    chunk_right_context=2), 5, 6)
    assert (model.left_context, model.right_context) == (3, 2)
    x = torch.randn(2, 3 + 21 + 2, 5)
    out = model(x)
    assert out.shape == (2, 21, 6)
    full = model(x, 0, 0)  # the same run, every frame's output kept
    assert torch.allclose(out, full[:, 3:-2])
    y = x.clone()
    y[:, 0] += 1.0  # a context frame changes the labelled frames' outputs
    assert not torch.allclose(model(y), out)


def test_blstm_is_bidirectional():
    torch.manual_seed(0)
    model = build_model(ModelConfig("blstm", layers=1, units=4), 3, 2)
    x = torch.randn(1, 10, 3)
    y = x.clone()
    y[0, -1] += 1.0  # a change at the end reaches the first frame's output
    assert not torch.allclose(model(x)[0, 0], model(y)[0, 0])


def test_dnn_splices_context_frames_in_frame_order():
    torch.manual_seed(0)
    model = build_model(ModelConfig("dnn", splice=2, hidden_layers=1, hidden_units=6), 3, 4)
    x = torch.randn(2, 9, 3)  # 5 labelled frames + 2 context frames each side
    out = model(x)
    assert out.shape == (2, 5, 4)
    first = model.net[0]
    spliced = x[:, 1:6].reshape(2, 15)  # frames t-2..t+2 of output frame 1, concatenated
    expected = model.net[1:](first(spliced))
    torch.testing.assert_close(out[:, 1], expected)


def test_dnn_takes_the_decoders_context_arguments_only_as_its_splice():
    model = build_model(ModelConfig("dnn", splice=2, hidden_layers=1, hidden_units=6), 3, 4)
    x = torch.randn(1, 9, 3)
    torch.testing.assert_close(model(x, 2, 2), model(x))
    with pytest.raises(ValueError, match="a DNN's context is its splice"):
        model(x, 3, 1)


def test_bad_model_options_are_refused_naming_the_flag():
    with pytest.raises(AsrdistError, match="--model 'rnn': choose one of blstm, dnn"):
        ModelConfig("rnn")
    with pytest.raises(AsrdistError, match="--layers must be positive, got 0"):
        ModelConfig(layers=0)
    with pytest.raises(AsrdistError, match=r"--dropout must be in \[0, 1\), got 1.0"):
        ModelConfig(dropout=1.0)
