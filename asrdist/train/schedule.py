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
from dataclasses import dataclass

from asrdist.options import NON_NEGATIVE, POSITIVE, Options, at_least, option

SCHEDULES = ("ibm", "kaldi")


@dataclass(frozen=True)
class ScheduleOptions(Options):
    """The learning-rate rule's options (asrdist-train's and asrdist-simulate's)."""

    lr: float = option(0.1, "learning rate at a global batch of --lr-ref-batch chunks",
                       check=POSITIVE)
    lr_schedule: str = option("ibm", "learning-rate rule: ibm (batch scaling, warm-up, "
                              "per-epoch annealing) or kaldi (learners x --lr decaying "
                              "exponentially to --lr-final; Kaldi's parameter averaging)",
                              SCHEDULES)
    lr_final: float = option(0.01, "kaldi schedule: the effective learning rate at the end",
                             check=POSITIVE)
    lr_ref_batch: int = option(256, "global batch (chunks) at which --lr applies",
                               check=POSITIVE)
    lr_scaling: str = option("linear", "how the peak learning rate follows the global batch "
                             "(batch-size x learners)", ("linear", "sqrt", "none"))
    warmup_epochs: float = option(1.0, "linear warm-up from --lr to the scaled peak, in epochs",
                                  check=NON_NEGATIVE)
    anneal_start: int = option(6, "first epoch (counted from 1) whose learning rate is "
                               "annealed", check=POSITIVE)
    anneal_factor: float = option(math.sqrt(2), "divide the learning rate by this every epoch "
                                  "from --anneal-start on (IBM: sqrt 2)", check=at_least(1))


def constant_rate(lr: float) -> ScheduleOptions:
    """The options under which the rate is ``lr`` at every step: the ibm rule unscaled, with
    no warm-up and no annealing (the simulator studies' rate)."""
    return ScheduleOptions(lr=lr, lr_scaling="none", warmup_epochs=0.0, anneal_factor=1.0)


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
    options: ScheduleOptions, batch_size: int, steps_per_epoch: list[int], learners: int,
    max_steps: int = 0,
) -> LrSchedule | KaldiSchedule:
    """The --lr-schedule of ``options`` for a run of ``learners`` taking ``batch_size`` chunks a
    step each, with these epoch lengths (in steps), stopped after ``max_steps`` (0: never)."""
    o = options
    if o.lr_schedule == "kaldi":
        total = sum(steps_per_epoch)
        if max_steps:
            total = min(total, max_steps)
        return KaldiSchedule(o.lr, o.lr_final, learners, total)
    return LrSchedule(
        o.lr, o.lr_ref_batch, batch_size * learners, o.lr_scaling,
        round(o.warmup_epochs * steps_per_epoch[0]), o.anneal_start, o.anneal_factor,
    )
