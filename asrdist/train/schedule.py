"""Learning rate: IBM's rule (scaled with the global batch, warm-up, per-epoch annealing) or
Kaldi's parameter-averaging rule; ``--lr-schedule`` chooses.

IBM (``ibm``, the default):

The rule (Goyal et al. 2017 for the scaling and warm-up, IBM's SWB recipes for annealing):

    global batch  B = batch_size * learners
    peak          = lr * (B / lr_ref_batch)        (lr_scaling linear; sqrt: square root; none: 1)
    warm-up       linear from min(lr, peak) to peak over warmup_epochs (in steps)
    annealing     peak / anneal_factor ** (epoch - anneal_start + 1) from epoch anneal_start on
                  (epochs counted from 1; IBM: factor sqrt 2 per epoch in the later epochs)

Linear scaling keeps the per-sample step size constant when learners are added; the warm-up
avoids the early divergence large rates cause. For asynchronous strategies the same global
batch is used: each learner's gradient still moves the learners' mean by lr/N per sample.

Kaldi (``kaldi``; nnet2/nnet3 ``train_*.py`` with parameter averaging):

    rate(step) = learners * lr * (lr_final / lr) ** (step / total_steps)

The effective rate decays exponentially from ``lr`` to ``lr_final`` over the run, and each of
the N jobs trains at N times it, since averaging N models divides each one's movement by N
(Povey et al., arXiv:1410.7455: NG-SGD is what keeps such rates stable). No warm-up, no
batch scaling, no annealing: those options are ignored.
"""

from __future__ import annotations

import math

from asrdist.train.config import TrainConfig


def scaled_lr(lr: float, ref_batch: int, global_batch: int, scaling: str) -> float:
    """The peak learning rate for ``global_batch`` chunks per step over all learners."""
    ratio = global_batch / ref_batch
    if scaling == "linear":
        return lr * ratio
    if scaling == "sqrt":
        return lr * math.sqrt(ratio)
    return lr


class LrSchedule:
    """A pure function of (step, epoch), so resuming needs only the counters."""

    def __init__(
        self,
        lr: float,
        ref_batch: int,
        global_batch: int,
        scaling: str,
        warmup_steps: int,
        anneal_start: int,
        anneal_factor: float,
    ) -> None:
        self.peak = scaled_lr(lr, ref_batch, global_batch, scaling)
        self.start = min(lr, self.peak)
        self.warmup_steps = warmup_steps
        self.anneal_start = anneal_start
        self.anneal_factor = anneal_factor

    def lr_at(self, step: int, epoch: int) -> float:
        """Rate for 0-based global ``step`` inside 0-based ``epoch``."""
        if step < self.warmup_steps:
            return self.start + (self.peak - self.start) * (step + 1) / self.warmup_steps
        annealed = max(0, epoch + 1 - self.anneal_start + 1)
        return self.peak / self.anneal_factor**annealed


class KaldiSchedule:
    """Kaldi's averaging rate: learners x an exponential decay from lr to lr_final."""

    def __init__(self, lr: float, lr_final: float, learners: int, total_steps: int) -> None:
        self.peak = learners * lr
        self.ratio = lr_final / lr
        self.total_steps = max(1, total_steps)

    def lr_at(self, step: int, epoch: int) -> float:
        """Rate for 0-based global ``step`` (the epoch does not matter)."""
        return self.peak * self.ratio ** (min(step, self.total_steps) / self.total_steps)


def make_schedule(
    cfg: TrainConfig, steps_per_epoch: list[int], learners: int
) -> LrSchedule | KaldiSchedule:
    """The --lr-schedule of ``cfg`` for a run of ``learners`` with these epoch lengths."""
    if cfg.lr_schedule == "kaldi":
        total = sum(steps_per_epoch)
        if cfg.max_steps:
            total = min(total, cfg.max_steps)
        return KaldiSchedule(cfg.lr, cfg.lr_final, learners, total)
    return LrSchedule(
        cfg.lr, cfg.lr_ref_batch, cfg.batch_size * learners, cfg.lr_scaling,
        round(cfg.warmup_epochs * steps_per_epoch[0]), cfg.anneal_start, cfg.anneal_factor,
    )
