"""The network scorer's chunked runs (nnet3-compute --frames-per-chunk, --extra-*-context)."""

from __future__ import annotations

from pathlib import Path

import kaldiio
import numpy as np
import pytest
import torch

from asrdist.decode.acoustic import Chunking, NnetScorer, chunk_starts
from asrdist.errors import AsrdistError
from asrdist.models.build import ModelConfig, build_model

DIM, PDFS, FRAMES = 6, 7, 23


def _final_pt(path: Path, config: ModelConfig, chunk_len: int) -> Path:
    torch.manual_seed(0)
    model = build_model(config, DIM, PDFS)
    torch.save({
        "model": model.state_dict(), "model_config": config.to_dict(), "input_dim": DIM,
        "num_pdfs": PDFS, "log_priors": torch.full((PDFS,), -float(np.log(PDFS))),
        "cmvn": "none", "cmvn_norm_vars": False, "left_context": model.left_context,
        "right_context": model.right_context, "chunk_len": chunk_len,
    }, path)
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    feats = np.random.default_rng(0).normal(size=(FRAMES, DIM)).astype(np.float32)
    kaldiio.save_ark(str(d / "feats.ark"), {"u1": feats}, scp=str(d / "feats.scp"))
    (d / "utt2spk").write_text("u1 s1\n")
    return d


@pytest.fixture
def blstm(tmp_path: Path) -> Path:
    config = ModelConfig(type="blstm", layers=1, units=5, chunk_left_context=4,
                         chunk_right_context=3)
    return _final_pt(tmp_path / "blstm.pt", config, chunk_len=5)


def _scores(final_pt: Path, data: Path, chunking: Chunking) -> np.ndarray:
    return next(NnetScorer(final_pt, data, chunking).scores(["u1"]))[1]


def test_a_negative_chunk_or_context_is_refused() -> None:
    with pytest.raises(AsrdistError, match="--extra-left-context must not be negative, got -1"):
        Chunking(extra_left_context=-1)


def test_chunk_starts_cover_the_utterance_with_equal_windows() -> None:
    assert chunk_starts(23, 5).tolist() == [0, 5, 10, 15, 18]
    assert chunk_starts(20, 5).tolist() == [0, 5, 10, 15]
    assert chunk_starts(4, 5).tolist() == [0]


def test_one_chunk_covering_the_utterance_is_the_whole_utterance_run(blstm, data) -> None:
    whole = _scores(blstm, data, Chunking(frames_per_chunk=0))
    assert whole.shape == (FRAMES, PDFS)
    assert np.array_equal(_scores(blstm, data, Chunking(frames_per_chunk=FRAMES)), whole)
    assert np.array_equal(_scores(blstm, data, Chunking(frames_per_chunk=100)), whole)


def test_chunks_see_their_context_frames_and_no_more(blstm, data) -> None:
    """Default: the training chunk (5) and context (4 left, 3 right). Each chunk's scores are
    those of the model run on that window alone; other context widths change them."""
    scorer = NnetScorer(blstm, data)
    assert (scorer.frames_per_chunk, scorer.left, scorer.right) == (5, 4, 3)
    chunked = next(scorer.scores(["u1"]))[1]
    feats = next(iter(kaldiio.load_scp(str(data / "feats.scp")).values()))
    padded = np.pad(feats, ((4, 3), (0, 0)), mode="edge")
    with torch.no_grad():
        window = torch.from_numpy(padded[5:5 + 4 + 5 + 3])[None]  # frames 5..9
        logits = scorer.model(window)[0]
    expected = torch.log_softmax(logits, -1).numpy() + np.log(PDFS)
    assert np.allclose(chunked[5:10], expected, atol=1e-5)
    no_context = _scores(blstm, data, Chunking(None, 0, 0))
    more_context = _scores(blstm, data, Chunking(None, 10, 10))
    whole = _scores(blstm, data, Chunking(frames_per_chunk=0))
    for other in (no_context, more_context, whole):
        assert not np.allclose(chunked[5:10], other[5:10], atol=1e-4)


def test_fixed_context_model_chunks_alike_and_refuses_other_context(tmp_path, data) -> None:
    dnn = _final_pt(tmp_path / "dnn.pt", ModelConfig(type="dnn", splice=2, hidden_layers=1,
                                                     hidden_units=8), chunk_len=5)
    whole = _scores(dnn, data, Chunking(frames_per_chunk=0))
    assert np.allclose(_scores(dnn, data, Chunking()), whole, atol=1e-5)
    with pytest.raises(AsrdistError, match="context is fixed"):
        NnetScorer(dnn, data, Chunking(extra_left_context=4))
    with pytest.raises(AsrdistError, match="--frames-per-chunk must not be negative, got -1"):
        NnetScorer(dnn, data, Chunking(frames_per_chunk=-1))
