"""What the simulator studies share: cached runs, the corpus in memory, the study options (the
model among them) and hadpsgd's nodes."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from asrdist.data.options import DataOptions
from asrdist.models.build import ModelConfig
from asrdist.options import flatten, value_of
from asrdist.simulate.cache import RunCache
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec
from asrdist.simulate.speed import SpeedModel
from asrdist.train.schedule import constant_rate

# hadpsgd as the simulator studies run it: super-learners of 4 GPUs (a node) on a random ring
HADPSGD_NODES_OF_4 = {"learners_per_node": 4, "hadpsgd_variant": "random"}


# What the studies run unless they say otherwise (RunSpec's defaults are asrdist-train's): a
# 1x64 BLSTM, 16 chunks per learner per step, one epoch, the gradient clipped at 5, SGD with
# momentum 0.9 at a constant rate
STUDY_DEFAULTS = RunSpec(algo="ssgd", epochs=1.0, model=ModelConfig(layers=1, units=64),
                         reading=DataOptions(batch_size=16), schedule=constant_rate(0.1),
                         grad_clip=5.0)


def study_spec(**changes: Any) -> RunSpec:
    """:data:`STUDY_DEFAULTS` with ``changes`` (RunSpec's fields, or its components' options
    by their flags' names: ``batch_size``, ``lr``, ``momentum``)."""
    return STUDY_DEFAULTS.replace(**changes)


def cache_values(spec: RunSpec, speed: SpeedModel, chunks: int,
                 noise_every: int = 0) -> dict[str, Any]:
    """What a run is cached by, in the layout RunSpec had before it held the option objects
    (issue 33), so that the runs cached then are found again: its fields then, a constant rate
    as no schedule, and ``lr`` as the studies gave it beside a schedule (the scaled peak, which
    the run ignored). A value that layout has no place for is added, by name, where it is not
    the study's default (one that did not exist then)."""
    constant = spec.schedule == constant_rate(spec.schedule.lr)
    lr = spec.schedule.lr if constant else (
        spec.schedule.lr * spec.global_batch() / spec.schedule.lr_ref_batch)
    values = {"algo": spec.algo, "learners": spec.learners, "batch": spec.batch,
              "epochs": spec.epochs, "lr": lr, "momentum": spec.optim.momentum,
              "grad_clip": spec.grad_clip, "model": spec.model.identity(),
              "options": spec.options, "seed": spec.seed, "evals": spec.evals,
              "nesterov": spec.optim.nesterov, "weight_decay": spec.optim.weight_decay,
              "schedule": None if constant else dataclasses.asdict(spec.schedule),
              "eval_start": spec.eval_start}
    then = {"batch_size", "momentum", "nesterov", "weight_decay"}
    for name, value in {**flatten(spec.reading), **flatten(spec.optim)}.items():
        if name not in then and value != value_of(STUDY_DEFAULTS, name):
            values[name] = value
    for f in dataclasses.fields(spec):
        if f.name not in values and f.name not in ("reading", "optim", "schedule") and \
                getattr(spec, f.name) != getattr(STUDY_DEFAULTS, f.name):
            values[f.name] = getattr(spec, f.name)
    values = {**values, "speed": dataclasses.asdict(speed), "chunks": chunks}
    if noise_every:  # only then: the runs cached before it keep their keys
        values["noise_every"] = noise_every
    return values


def cache_key(values: dict[str, Any]) -> str:
    """The name a run's result has in the cache."""
    return hashlib.md5(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()


def study_runs(data: str, targets: str, cache: str, max_utts: int = 0) -> RunCache:
    """The studies' runs on the corpus (the chunk pool's defaults, 100 held-out utterances, one
    thread), kept in ``cache`` under :func:`cache_key`, so that the runs cached before the
    studies ran on the package's cache are found again."""
    torch.set_num_threads(1)
    pool = ChunkPool.load(data, targets, heldout_utts=100, max_utts=max_utts)
    chunks = len(pool.train)

    def key(spec: RunSpec, speed: SpeedModel, noise_every: int,
            lost: dict[int, float] | None) -> str:
        if lost:
            raise ValueError("the studies' cache key has no place for lost learners")
        return cache_key(cache_values(spec, speed, chunks, noise_every))

    source = {"data": str(Path(data).resolve()), "targets": str(Path(targets).resolve()),
              "max_utts": max_utts}
    return RunCache(pool, cache, source, key)


def corpus_options(ap: argparse.ArgumentParser) -> None:
    """The options every study takes: the corpus, its subset and the run cache."""
    ap.add_argument("--data", required=True, help="train_fbank of the mini recipe")
    ap.add_argument("--targets", required=True, help="mono_pdf of the mini recipe")
    ap.add_argument("--cache", default="/tmp/asrdist-studies", help="finished runs, by spec")
    ap.add_argument("--max-utts", type=int, default=0, help="training utterances (0 = all)")
    ap.add_argument("--hours", default="5", help="the corpus's size, for the section's text")
