"""The Conformer: its attention is the hand formula, its context is read then dropped, bad sizes
are one line, and it trains (one learner and two real ones) and scores through final.pt."""

from __future__ import annotations

import math

import kaldiio
import pytest
import torch
from click.testing import CliRunner

from asrdist.cli.compute_loglikes import main as compute_loglikes
from asrdist.cli.train import main as train
from asrdist.errors import AsrdistError
from asrdist.models.build import ModelConfig, build_model
from asrdist.models.conformer import MAX_DISTANCE, RelativeSelfAttention
from asrdist.models.final import load_final
from asrdist.testing import make_corpus
from asrdist.train.config import make_config
from asrdist.train.identity import run_options
from tests.parallel.cli_learners import TINY_MODEL, join_learners, start_learners

SMALL = ["--model=conformer", "--conformer-blocks=1", "--attention-dim=8",
         "--attention-heads=2", "--conv-kernel=3", "--chunk-left-context=3",
         "--chunk-right-context=2"]


def test_attention_is_the_softmax_of_scores_plus_a_bias_by_clipped_distance():
    torch.manual_seed(0)
    attention = RelativeSelfAttention(dim=4, heads=2, dropout=0.0).eval()
    frames = MAX_DISTANCE + 6  # distances beyond the clip share its bias
    x = torch.randn(1, frames, 4)
    q, k, v = attention.qkv(attention.norm(x))[0].split(4, dim=-1)
    heads = []
    for h in range(2):
        cols = slice(2 * h, 2 * h + 2)
        scores = q[:, cols] @ k[:, cols].T / math.sqrt(2)
        for i in range(frames):
            for j in range(frames):
                distance = max(-MAX_DISTANCE, min(MAX_DISTANCE, j - i))
                scores[i, j] += attention.distance_bias.weight[distance + MAX_DISTANCE, h]
        heads.append(torch.softmax(scores, dim=-1) @ v[:, cols])
    expected = attention.out(torch.cat(heads, dim=-1))
    torch.testing.assert_close(attention(x)[0], expected, rtol=1e-5, atol=1e-6)


def test_context_frames_are_read_then_dropped():
    config = ModelConfig(type="conformer", conformer_blocks=2, attention_dim=8,
                         attention_heads=2, conv_kernel=5, chunk_left_context=3,
                         chunk_right_context=2)
    model = build_model(config, 6, 5).eval()
    x = torch.randn(2, 15, 6)
    out = model(x)
    assert out.shape == (2, 10, 5)
    torch.testing.assert_close(out, model(x, 0, 0)[:, 3:13])


@pytest.mark.parametrize(("sizes", "message"), [
    (dict(attention_dim=10, attention_heads=4),
     "--attention-dim 10 is not a multiple of --attention-heads 4"),
    (dict(conv_kernel=4), "--conv-kernel 4: the kernel must be odd"),
])
def test_sizes_the_model_cannot_take_are_one_line_naming_the_options(sizes, message):
    with pytest.raises(AsrdistError, match=message):
        ModelConfig(type="conformer", **sizes)


def test_a_conformer_trains_and_its_final_pt_scores_every_utterance(tmp_path):
    data, targets = make_corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    trained = CliRunner().invoke(train, [
        "--data", str(data), "--targets", str(targets), "--out", str(out), *TINY_MODEL,
        *SMALL, "--epochs=3", "--lr=0.5"])
    assert trained.exit_code == 0, trained.output
    model, exported = load_final(out / "final.pt")
    assert exported.model_config.type == "conformer" and type(model).__name__ == "Conformer"
    assert (exported.left_context, exported.right_context) == (3, 2)
    scored = CliRunner().invoke(compute_loglikes, [
        "--model", str(out / "final.pt"), "--data", str(data), "--out", str(tmp_path / "ll")])
    assert scored.exit_code == 0, scored.output
    feats = dict(kaldiio.load_scp(str(data / "feats.scp")))
    loglikes = dict(kaldiio.load_scp(str(tmp_path / "ll" / "loglikes.scp")))
    assert loglikes.keys() == feats.keys()
    assert all(loglikes[u].shape == (len(feats[u]), exported.num_pdfs) for u in feats)


@pytest.mark.parametrize("algo", ["ssgd", "adpsgd-random"])
def test_two_learner_processes_train_a_conformer(tmp_path, algo):
    corpus = make_corpus(tmp_path / "corpus", num_utts=16)
    out = tmp_path / "run"
    procs = start_learners(corpus, out, algo, *TINY_MODEL, *SMALL, "--epochs=2",
                           "--exchange-timeout=20")
    assert join_learners(procs, out, limit=120) == [0, 0]
    model, exported = load_final(out / "final.pt")
    assert type(model).__name__ == "Conformer" and exported.world_size == 2


CONFORMER_OPTIONS = ("conformer_blocks", "attention_dim", "attention_heads", "conv_kernel")


def test_the_conformer_s_sizes_are_part_of_a_conformer_run_s_identity_only():
    """A BLSTM's run keeps the identity it had before the Conformer (its --resume and the skip
    of a finished run compare as before); a Conformer's run changes with its sizes."""
    given = {"data": "d", "targets": "t", "out": "o"}
    blstm = run_options(make_config(None, given), 1)
    assert not set(CONFORMER_OPTIONS) & set(blstm)
    conformer = run_options(make_config(None, {**given, "model": "conformer"}), 1)
    assert set(CONFORMER_OPTIONS) <= set(conformer)
