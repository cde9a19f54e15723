"""Strategy options and process options, each a frozen dataclass (asrdist.options).

A strategy declares the options of its algorithm alone; how a learner process talks to the
others (the exchange timeout, an injected straggler, distance sampling, elastic membership) is
:class:`ProcessOptions`, which the launcher hands to the process transport
(:mod:`asrdist.parallel.processes.transport`), as torch's averagers and torchft keep fault handling
on the launcher and manager, outside the algorithm.

A field's name is its YAML key and, with ``_`` -> ``-``, its asrdist-train flag (and
asrdist-simulate's, for the options a simulated run has); its declaration holds the default,
the help text, the allowed choices and the check, run when the dataclass is made (raising
:class:`AsrdistError` naming the flag), so a bad value is refused where the option is defined,
whichever strategy the run uses. A field named like a training option (``seed``) is not a flag
of its own: the strategy gets that option's value. ``option``, ``require`` and ``flag`` are
asrdist.options's, importable from here as well (strategy modules of one's own use them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from asrdist.errors import AsrdistError
from asrdist.options import NON_NEGATIVE, POSITIVE, Options, flag, option, require
from asrdist.parallel.rules.compress import CODECS
from asrdist.parallel.rules.slow import parse_slow_learner

__all__ = ["CompressOptions", "NoOptions", "ProcessOptions", "flag", "option", "require",
           "training_option"]


def training_option(default: Any, help: str) -> Any:
    """A field named like a training option (``seed``, ``batch_size``): no flag of its own,
    the strategy gets the run's value; ``default`` serves a strategy made outside a run."""
    return field(default=default, metadata={"help": help, "choices": None, "check": None,
                                            "name": None, "training": True})


@dataclass(frozen=True)
class NoOptions(Options):
    """The options of a strategy that takes none."""


@dataclass(frozen=True)
class CompressOptions(Options):
    """What a strategy's exchange sends (:mod:`asrdist.parallel.rules.compress`): an axis of every
    multi-learner strategy, not a strategy. It changes the maths, so it is fingerprinted.
    ``powersgd`` is torch's PowerSGD DDP hook: a strategy whose exchange is a DDP gradient
    mean (ssgd) sets ``powersgd_ok``."""

    powersgd_ok: ClassVar[bool] = False

    compress: str = option("none", "the exchange's encoding: none (float32), bf16, fp16, int8 "
                           "and fp8 (per-block absmax scale), 1bit (sign, per-block mean |x|), "
                           "powersgd (ssgd only: torch's PowerSGD hook); ma, bmuf, diloco send "
                           "the block's update, adpsgd the weights, ssgd the gradients",
                           choices=("none", *CODECS[1:], "powersgd"))
    compress_rank: int = option(1, "powersgd's rank (--compress powersgd)", check=POSITIVE)
    error_feedback: bool = option(True, "add what a lossy --compress lost to the next message "
                                  "(Seide et al. 2014); ssgd's bf16/fp16 (torch's hooks) have "
                                  "none")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.compress == "powersgd" and not self.powersgd_ok:
            raise AsrdistError("--compress powersgd: only ssgd takes it (torch's PowerSGD "
                               "compresses DDP's gradient buckets)")


@dataclass(frozen=True)
class ProcessOptions(Options):
    """How a learner process talks to the others: every multi-learner strategy runs under
    them (``elastic`` only those the registry says can lose a learner)."""

    exchange_timeout: float = option(120.0, "seconds a rendezvous or any exchange may take; "
                                     "then the job ends naming the lost learner",
                                     check=POSITIVE, fingerprint=False)
    # timing, not maths; fingerprinted all the same (a straggler study's runs differ by it)
    slow_learner: str = option("", "RANK:FACTOR: make learner RANK FACTOR times slower "
                               "(straggler studies)", resumable=True)
    distance_every: float = option(30.0, "seconds between samples of each learner's distance "
                                   "to the learners' mean (0 = off)", check=NON_NEGATIVE,
                                   fingerprint=False)
    bind: str = option("", "the address the run's store and an elastic run's outer-state "
                       "server listen on, on learner 0's host (default: MASTER_ADDR's; never "
                       "all interfaces)", fingerprint=False)
    elastic: bool = option(False, "adpsgd, hadpsgd, diloco-async on real processes: drop a "
                           "learner (hadpsgd: its node) that dies or is silent past "
                           "--exchange-timeout and go on with the others; final.pt averages "
                           "the survivors")

    def __post_init__(self) -> None:
        super().__post_init__()
        parse_slow_learner(self.slow_learner)

    def check_world(self, world_size: int) -> None:
        """Refuse values that do not fit the number of learners (before any rendezvous)."""
        slow = parse_slow_learner(self.slow_learner)
        if slow is not None and slow[0] >= world_size:
            raise AsrdistError(f"--slow-learner {self.slow_learner}: there is no learner "
                               f"{slow[0]} among {world_size} (ranks 0..{world_size - 1})")
