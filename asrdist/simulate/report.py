"""A simulated run's report: one JSON layout for asrdist-simulate, asrdist-compare's runs and
the studies' run cache, so that every reader (asrdist-plot, the comparison's table and figures,
the studies) takes any of them.

A report is :func:`describe`'s fields (what the run was: version, spec with the strategy's
options resolved, speed model, a step's cost, data, model size, steps), a writer's own (a
comparison's cell, a cache's key) and the run's outcome (:func:`build`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import asrdist
from asrdist.fsutil import atomic_write
from asrdist.models.build import build_model
from asrdist.parallel import registry
from asrdist.simulate import guards
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec, run_steps, strategy_options
from asrdist.simulate.run import Result
from asrdist.simulate.speed import SpeedModel

Report = dict[str, Any]


def model_size(pool: ChunkPool, spec: RunSpec) -> dict[str, int]:
    """The model's weights and bytes (what one exchange of it moves)."""
    params = list(build_model(spec.model, pool.input_dim, pool.num_pdfs).parameters())
    return {"weights": sum(p.numel() for p in params),
            "bytes": sum(p.numel() * p.element_size() for p in params)}


def resolved_options(spec: RunSpec, pool: ChunkPool) -> dict[str, Any]:
    """Every option the strategy was built with, defaults and the run's training values
    filled in (its own: the process options are no strategy's); what it derived from them
    (a block momentum from the number of learners, a period from --avg-frames) is in the
    summary's ``strategy``, as the strategy reports it."""
    return dataclasses.asdict(registry.make_options(spec.algo, strategy_options(spec, pool)))


def describe(spec: RunSpec, speed: SpeedModel, pool: ChunkPool, source: dict[str, Any],
             model: dict[str, int] | None = None) -> Report:
    """What a report says of its run besides the figures, so that it stands on its own;
    ``source``: where the data came from; ``model``: :func:`model_size`, if known already."""
    model = model_size(pool, spec) if model is None else model
    per_epoch, steps = run_steps(pool, spec)
    return {
        "version": asrdist.__version__,
        "spec": {**dataclasses.asdict(spec), "options": resolved_options(spec, pool)},
        "speed": speed.to_json(),
        "cost": guards.step_cost(speed, spec.learners, model["bytes"]),
        "data": {**source, **pool.describe()},
        "model": model,
        "steps": {"per_epoch": per_epoch, "total": steps},
    }


def build(about: Report, result: Result, warnings: list[str], noise_every: int = 0,
           **extra: Any) -> Report:
    """The whole report: ``about`` (:func:`describe`), a writer's ``extra`` fields, the
    ``warnings`` and the run's outcome; B_simple as ``noise_scale`` where it was measured."""
    return {**about, **extra, "warnings": warnings, "failed": result.summary.get("failed"),
            "records": result.records, "summary": result.summary,
            "host_s": result.summary["host_s"],
            **({"noise_scale": result.noise} if noise_every else {})}


def write(path: str | os.PathLike, found: Report) -> None:
    """Whole or not at all: an interrupted write leaves the file that was there."""
    with atomic_write(path) as f:
        json.dump(found, f, indent=1)


def read(path: str | os.PathLike) -> Report | None:
    """A run's report, or None if there is none (or only a damaged one: it is rerun)."""
    try:
        found = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return found if isinstance(found, dict) else None
