"""SpecAugment (Park et al., 2019) on the training chunks, drawn and applied for a whole batch.

Each chunk gets random bands of its input dimensions and random runs of its frames set to the
chunk's mean; the frame labels stay. The network learns not to lean on any one band or frame,
which is what carries it to voices never heard in training: in the mini recipe's test voices,
all unseen, the BLSTM's WER fell from 15.65 % to 13.98 % with it (espeak 4.37 -> 3.53, flite
26.73 -> 24.24; RESULTS.md).
There is no time warping: the labels come from a frame alignment, and warping the frames would
move them against their labels.

The distributions are those of lhotse's ``SpecAugment`` as the trainer used it before (with
``time_warp_factor=None``, ``p=0.9``, mask sizes ``width + 1``): a chunk is masked at all with
probability 0.9; each of its ``feature_masks`` bands has a width uniform in [0, width] and
starts at ``floor(u * (dims - width))``, u uniform in [0, 1); the time masks alike, their count
and widest run cut so that they cover at most 15 % of the chunk's frames (lhotse's
``max_frames_mask_fraction``); masks may overlap; all masks of a chunk take the chunk's mean
before masking. lhotse draws each chunk's masks in a Python loop (about two calls per chunk,
13 % of a CPU step of the mini BLSTM); here a batch's masks are a few tensor operations on the
batch's device, so they cost next to nothing beside a step. Two differences: the draws come
from a ``torch.Generator`` of the masks' own (lhotse's from Python's and torch's global ones),
so the masks do not depend on dropout's draws nor race with another thread's, and a run's
checkpoints hold its state; and where a chunk is too short for one frame of time mask
(lhotse then fails) there are no time masks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from asrdist.errors import AsrdistError
from asrdist.options import NON_NEGATIVE, POSITIVE, Options, option

# The share of a chunk's frames the time masks may cover in all (SpecAugment's p; lhotse's
# max_frames_mask_fraction).
MAX_MASKED_FRAMES = 0.15
APPLIED_FRACTION = 0.9  # chunks that get masks at all (lhotse's p)
_STREAM = 0x5A5C  # tells the masks' seed apart from the other seeds made of (seed, rank)
# torch spreads an operation on this many elements or more (its GRAIN_SIZE) over its intra-op
# threads; a batch of masks is too small to gain, and on a busy machine each such operation
# waits for a descheduled thread: a 64 x 41 x 13 batch took 49 ms on 2 threads, 0.24 ms on 1.
# On CPU the batch is masked in blocks of rows below it.
GRAIN_SIZE = 32768


@dataclass(frozen=True)
class MaskOptions(Options):
    """How many masks of up to how many dims / frames each chunk gets."""

    feature_masks: int = option(0, "SpecAugment: bands of input dims masked per training "
                                "chunk (0 = none)", check=NON_NEGATIVE)
    feature_mask_width: int = option(2, "SpecAugment: the widest band, in input dims",
                                     check=POSITIVE)
    time_masks: int = option(0, "SpecAugment: runs of frames masked per training chunk "
                             "(0 = none; 15 % of a chunk's frames at most in all)",
                             check=NON_NEGATIVE)
    time_mask_width: int = option(2, "SpecAugment: the longest run, in frames", check=POSITIVE)

    @property
    def enabled(self) -> bool:
        return self.feature_masks > 0 or self.time_masks > 0


def check_fits(options: MaskOptions, input_dim: int) -> None:
    """Refuse feature masks as wide as the input: they could blank a chunk's every dim."""
    if options.feature_masks and options.feature_mask_width >= input_dim:
        raise AsrdistError(f"--feature-mask-width {options.feature_mask_width} must be below "
                           f"the input's {input_dim} dims")


def mask_generator(seed: int, rank: int, device: torch.device | str = "cpu") -> torch.Generator:
    """The masks' own generator for learner ``rank``: each learner masks differently, and
    none of its draws is shared with the generators seeded from ``seed + 1 + rank``. On a
    CUDA ``device`` the draws stay there (no copy, no host sync); CPU and CUDA generators
    draw different masks from the same seed."""
    state = np.random.SeedSequence([seed, rank, _STREAM]).generate_state(1, np.uint64)[0]
    return torch.Generator(device).manual_seed(int(state))


def time_mask_shape(options: MaskOptions, frames: int) -> tuple[int, int]:
    """(count, widest run) of the time masks of a chunk of ``frames`` frames, as lhotse cuts
    them: at most MAX_MASKED_FRAMES of the frames in all."""
    if not options.time_masks:
        return 0, 0
    budget = MAX_MASKED_FRAMES * frames
    count = min(options.time_masks, math.ceil(budget / (options.time_mask_width + 1)))
    if count == 0:
        return 0, 0
    # lhotse's mask size (exclusive bound of the width) is min(width + 1, budget // count)
    return count, max(min(options.time_mask_width + 1, int(budget // count)) - 1, 0)


def _runs(count: int, widest: int, size: int, rows: int, generator: torch.Generator,
          device: torch.device) -> torch.Tensor:
    """(rows, size) bool: the union of ``count`` runs per row, each of a width uniform in
    [0, widest] starting at floor(u * (size - width))."""
    if count == 0 or widest == 0:
        return torch.zeros(rows, size, dtype=torch.bool, device=device)
    widths = torch.randint(widest + 1, (rows, count), generator=generator,
                           device=generator.device)
    starts = (torch.rand(rows, count, generator=generator, device=generator.device)
              * (size - widths)).long()
    widths, starts = widths.to(device), starts.to(device)
    at = torch.arange(size, device=device)
    inside = (at >= starts[..., None]) & (at < (starts + widths)[..., None])
    return inside.any(1)


def make_spec_augment(options: MaskOptions, generator: torch.Generator
                      ) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """A function masking a (chunks, frames, dims) batch with draws from ``generator``
    (returning a new tensor), or None when no masks are asked."""
    if not options.enabled:
        return None

    def apply(x: torch.Tensor) -> torch.Tensor:
        rows, frames, dims = x.shape
        applied = torch.rand(rows, generator=generator, device=generator.device)
        applied = (applied < APPLIED_FRACTION).to(x.device)[:, None]
        bands = _runs(options.feature_masks, options.feature_mask_width, dims, rows,
                      generator, x.device) & applied
        runs = _runs(*time_mask_shape(options, frames), frames, rows, generator,
                     x.device) & applied
        out = torch.empty_like(x)
        block = max((GRAIN_SIZE - 1) // max(frames * dims, 1), 1) if x.is_cpu else rows
        for lo in range(0, rows, block):
            part = slice(lo, lo + block)
            masked = bands[part, None, :] | runs[part, :, None]
            torch.where(masked, x[part].mean((1, 2), keepdim=True), x[part], out=out[part])
        return out

    return apply
