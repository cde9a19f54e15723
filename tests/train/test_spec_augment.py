"""SpecAugment on training chunks: whole bands and whole frames set to the chunk's mean, drawn
for a whole batch from the masks' own generator, as lhotse's per-chunk transform drew them."""

from __future__ import annotations

import random

import pytest
import torch
from lhotse.dataset.signal_transforms import SpecAugment

from asrdist.errors import AsrdistError
from asrdist.parallel.strategy import Single
from asrdist.testing import make_corpus
from asrdist.train import spec_augment
from asrdist.train.spec_augment import (
    APPLIED_FRACTION,
    MAX_MASKED_FRAMES,
    MaskOptions,
    check_fits,
    make_spec_augment,
    mask_generator,
    time_mask_shape,
)
from asrdist.train.trainer import train
from tests.train.corpus import train_config, train_losses


def _batch(rows: int = 64) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(rows, 41, 13) + 3.0


def _masks(options: MaskOptions, x: torch.Tensor, seed: int = 0) -> torch.Tensor:
    return make_spec_augment(options, torch.Generator().manual_seed(seed))(x)


def _bands_and_frames(before: torch.Tensor, after: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per chunk, the dims and the frames that were masked whole (asserting nothing else)."""
    changed = before != after
    bands, frames = changed.all(1), changed.all(2)
    assert torch.equal(changed, bands[:, None, :] | frames[:, :, None])
    return bands, frames


def test_feature_masks_blank_whole_bands_with_the_chunk_mean():
    x = _batch()
    y = _masks(MaskOptions(feature_masks=2, feature_mask_width=3), x)
    bands, frames = _bands_and_frames(x, y)
    assert not frames.any()
    assert int(bands.sum(1).max()) <= 2 * 3
    for before, after, band in zip(x, y, bands, strict=True):
        if band.any():
            torch.testing.assert_close(after[:, band], before.mean().expand(41, int(band.sum())))
    assert int(bands.any(1).sum()) > 32
    assert torch.equal(x, _batch())  # the input batch is left as it was


def test_time_masks_blank_whole_frames_within_the_cap():
    x = _batch()
    y = _masks(MaskOptions(time_masks=3, time_mask_width=4), x)
    bands, frames = _bands_and_frames(x, y)
    assert not bands.any()
    counts = frames.sum(1)
    assert int(counts.max()) <= MAX_MASKED_FRAMES * 41
    assert int(counts.sum()) > 32
    for before, after, run in zip(x, y, frames, strict=True):
        if run.any():
            torch.testing.assert_close(after[run], before.mean().expand(int(run.sum()), 13))


def test_time_masks_are_cut_as_lhotse_cuts_them():
    # 41 frames: 6.15 frames at most; lhotse's mask size min(width + 1, 6.15 // count)
    assert time_mask_shape(MaskOptions(time_masks=2, time_mask_width=2), 41) == (2, 2)
    assert time_mask_shape(MaskOptions(time_masks=3, time_mask_width=4), 41) == (2, 2)
    assert time_mask_shape(MaskOptions(time_masks=1, time_mask_width=10), 41) == (1, 5)
    assert time_mask_shape(MaskOptions(time_masks=0), 41) == (0, 0)
    assert time_mask_shape(MaskOptions(time_masks=2, time_mask_width=2), 4) == (1, 0)


def test_widths_counts_and_chunks_masked_stay_within_bounds():
    """Every run is at most its width, runs at most their count, about 90 % of chunks masked."""
    x = _batch(4000)
    options = MaskOptions(feature_masks=2, feature_mask_width=2, time_masks=2, time_mask_width=2)
    bands, frames = _bands_and_frames(x, _masks(options, x))
    for mask, count, widest in ((bands, 2, 2), (frames, 2, 2)):
        edges = torch.diff(mask.int(), dim=1, prepend=torch.zeros(len(mask), 1, dtype=torch.int))
        assert int((edges == 1).sum(1).max()) <= count  # runs per chunk
        assert int(mask.sum(1).max()) <= count * widest
    untouched = ~(bands.any(1) | frames.any(1))
    # a masked chunk may draw only empty masks: 10 % skipped, plus (1/3)^4 of the others
    expected = 1 - APPLIED_FRACTION + APPLIED_FRACTION / 81
    assert abs(float(untouched.float().mean()) - expected) < 0.02


def test_rows_are_masked_independently():
    x = _batch(4000)
    options = MaskOptions(feature_masks=1, feature_mask_width=6)
    bands, _ = _bands_and_frames(x, _masks(options, x))
    masks = {tuple(b.tolist()) for b in bands}
    assert len(masks) > 30  # neither one draw for the batch nor a handful
    # the band's start of one chunk says nothing of its neighbour's
    starts = torch.where(bands.any(1), bands.int().argmax(1), -1).float()
    both = (starts[:-1] >= 0) & (starts[1:] >= 0)
    a, b = starts[:-1][both], starts[1:][both]
    assert abs(float(torch.corrcoef(torch.stack([a, b]))[0, 1])) < 0.1


def test_the_same_seed_draws_the_same_masks():
    x = _batch()
    options = MaskOptions(feature_masks=2, time_masks=2)
    assert torch.equal(_masks(options, x, seed=3), _masks(options, x, seed=3))
    assert not torch.equal(_masks(options, x, seed=3), _masks(options, x, seed=4))
    torch.manual_seed(5)
    first = _masks(options, x, seed=3)
    torch.manual_seed(6)  # the global generator plays no part
    assert torch.equal(first, _masks(options, x, seed=3))
    assert not torch.equal(mask_generator(0, 0).get_state(), mask_generator(0, 1).get_state())
    assert not torch.equal(mask_generator(0, 0).get_state(), mask_generator(1, 0).get_state())


def test_masking_in_blocks_of_rows_masks_as_one_block(monkeypatch):
    """On CPU the rows go in blocks (serial in torch); the masks are those of one block."""
    x = _batch(100)
    options = MaskOptions(feature_masks=2, time_masks=2)
    blocks = _masks(options, x)
    monkeypatch.setattr(spec_augment, "GRAIN_SIZE", 10**9)
    assert torch.equal(_masks(options, x), blocks)


@pytest.mark.parametrize("options", [
    MaskOptions(feature_masks=2, feature_mask_width=2, time_masks=2, time_mask_width=2),
    MaskOptions(feature_masks=1, feature_mask_width=5, time_masks=3, time_mask_width=4),
])
def test_the_masked_share_matches_lhotses_transform(options):
    """Same distributions as the lhotse transform the trainer used before (its mapping of the
    options: mask sizes width + 1, one empty time mask when there are none)."""
    x = _batch(3000)
    lhotse = SpecAugment(
        time_warp_factor=None, num_feature_masks=options.feature_masks,
        features_mask_size=options.feature_mask_width + 1,
        num_frame_masks=max(options.time_masks, 1),
        frames_mask_size=options.time_mask_width + 1 if options.time_masks else 1,
        max_frames_mask_fraction=MAX_MASKED_FRAMES, p=APPLIED_FRACTION)
    random.seed(0)
    torch.manual_seed(0)
    theirs = _bands_and_frames(x, lhotse(x))
    ours = _bands_and_frames(x, _masks(options, x))
    for their, our in zip(theirs, ours, strict=True):
        # the share of chunks with each dim (frame) masked: a binomial's spread is < 0.01
        torch.testing.assert_close(our.float().mean(0), their.float().mean(0), atol=0.035,
                                   rtol=0)
        assert abs(float(our.sum(1).float().mean() - their.sum(1).float().mean())) < 0.1


def test_no_masks_is_no_transform():
    assert make_spec_augment(MaskOptions(), torch.Generator()) is None
    assert make_spec_augment(MaskOptions(feature_masks=0, time_masks=0, feature_mask_width=5),
                             torch.Generator()) is None


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
