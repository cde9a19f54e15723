"""SpecAugment on training chunks: whole bands and whole frames set to the chunk's mean."""

from __future__ import annotations

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel.strategy import Single
from asrdist.testing import make_corpus
from asrdist.train.spec_augment import (
    MAX_MASKED_FRAMES,
    MaskOptions,
    check_fits,
    make_spec_augment,
)
from asrdist.train.trainer import train
from tests.train.corpus import train_config, train_losses


def _batch() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(64, 41, 13) + 3.0


def test_feature_masks_blank_whole_bands_with_the_chunk_mean():
    x = _batch()
    y = make_spec_augment(MaskOptions(feature_masks=2, feature_mask_width=3))(x)
    masked_chunks = 0
    for before, after in zip(x, y, strict=True):
        changed = before != after
        bands = changed.all(0)
        assert torch.equal(changed, bands.expand_as(changed))  # whole bands only
        assert int(bands.sum()) <= 2 * 3
        if bands.any():
            masked_chunks += 1
            torch.testing.assert_close(after[:, bands], before.mean().expand(41, int(bands.sum())))
    assert masked_chunks > 32
    assert torch.equal(x, _batch())  # the input batch is left as it was


def test_time_masks_blank_whole_frames_within_the_cap():
    x = _batch()
    y = make_spec_augment(MaskOptions(time_masks=3, time_mask_width=4))(x)
    counts = []
    for before, after in zip(x, y, strict=True):
        changed = before != after
        frames = changed.all(1)
        assert torch.equal(changed, frames[:, None].expand_as(changed))
        counts.append(int(frames.sum()))
    assert max(counts) <= MAX_MASKED_FRAMES * 41
    assert sum(counts) > 32


def test_no_masks_is_no_transform():
    assert make_spec_augment(MaskOptions()) is None


@pytest.mark.parametrize(("options", "flag"), [
    (dict(feature_masks=-1), "--feature-masks"),
    (dict(time_masks=-2), "--time-masks"),
    (dict(feature_mask_width=0), "--feature-mask-width"),
    (dict(time_mask_width=0), "--time-mask-width"),
])
def test_bad_mask_options_are_refused_naming_the_flag(options, flag, tmp_path):
    with pytest.raises(AsrdistError, match=flag):
        train_config((tmp_path / "d", tmp_path / "t"), tmp_path / "o", {}, **options)


def test_a_band_as_wide_as_the_input_is_refused():
    with pytest.raises(AsrdistError, match="--feature-mask-width 13 must be below"):
        check_fits(MaskOptions(feature_masks=1, feature_mask_width=13), 13)
    check_fits(MaskOptions(feature_masks=0, feature_mask_width=13), 13)


def test_training_with_masks_is_seeded_and_differs_from_training_without(tmp_path):
    corpus = make_corpus(tmp_path / "corpus")
    base = dict(layers=1, units=16, chunk_len=10, batch_size=8, shuffle_buffer=32,
                heldout_utts=2, log_every=1, lr=0.5, lr_ref_batch=8, epochs=2)
    masks = dict(feature_masks=2, time_masks=1)
    for name, options in (("a", masks), ("b", masks), ("plain", {})):
        train(train_config(corpus, tmp_path / name, base, **options), Single())
    losses = {name: train_losses(tmp_path / name / "metrics.jsonl") for name in ("a", "b", "plain")}
    assert losses["a"] == losses["b"]
    assert losses["a"] != losses["plain"]
