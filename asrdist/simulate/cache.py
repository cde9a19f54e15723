"""Simulated runs kept on disk by what their figures depend on, so that a study or a comparison
interrupted, or run again, does each run once.

A :class:`RunCache` names each run's report by its key (many runs in one directory, never
overwritten: a run's file is found again by any caller that runs the same spec); asrdist-compare's
:class:`~asrdist.simulate.sweep.Sweep` names its files by cell and checks the key kept inside.
Both key by :func:`run_key` unless given another key (the studies keep the layout their cached
runs were keyed by).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from asrdist.simulate import guards, report
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec, run
from asrdist.simulate.export import export_final
from asrdist.simulate.speed import SpeedModel

# (spec, speed, noise_every, lost) -> the run's key
KeyOf = Callable[[RunSpec, SpeedModel, int, dict[int, float] | None], str]


def run_key(spec: RunSpec, speed: SpeedModel, data: dict[str, Any],
            lost: dict[int, float] | None = None, noise_every: int = 0) -> str:
    """What a run's figures depend on, hashed: the spec, the speed model, the data (where it
    came from and :meth:`ChunkPool.describe`), the lost learners and the noise probe's period;
    the last two only where set, so that the keys of runs without them stay as they were."""
    values: dict[str, Any] = {"spec": asdict(spec), "speed": speed.to_json(), "data": data}
    if lost:
        values["lost"] = {str(r): f for r, f in sorted(lost.items())}
    if noise_every:
        values["noise_every"] = noise_every
    text = json.dumps(values, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_report(pool: ChunkPool, spec: RunSpec, speed: SpeedModel, source: dict[str, Any],
               noise_every: int = 0, lost: dict[int, float] | None = None,
               **extra: Any) -> report.Report:
    """Run ``spec`` and report it (:mod:`asrdist.simulate.report`), with the divergence guard's
    warning, the lost learners and a writer's ``extra`` fields."""
    result = run(pool, spec, speed, noise_every, lost=lost)
    divergence = guards.diverged(result.records)
    gone = [{"learner": r, "fraction": f} for r, f in sorted((lost or {}).items())]
    return report.build(report.describe(spec, speed, pool, source), result,
                        [divergence] if divergence else [], noise_every, **extra, lost=gone)


class RunCache:
    """Runs on ``pool`` (loaded from ``source``), each report kept in ``root/<key>.json``;
    ``key``: what names a run (:func:`run_key` of the spec, speed and data by default).
    ``host_s``: the host seconds of the runs this cache made (not those it found)."""

    def __init__(self, pool: ChunkPool, root: str | os.PathLike, source: dict[str, Any],
                 key: KeyOf | None = None) -> None:
        self.pool, self.root, self.source = pool, Path(root), source
        self._key = key
        self.root.mkdir(parents=True, exist_ok=True)
        self.host_s = 0.0

    def key(self, spec: RunSpec, speed: SpeedModel, noise_every: int = 0,
            lost: dict[int, float] | None = None) -> str:
        """The name the run's report has in the cache."""
        if self._key is not None:
            return self._key(spec, speed, noise_every, lost)
        return run_key(spec, speed, {**self.source, **self.pool.describe()}, lost, noise_every)

    def cached(self, spec: RunSpec, speed: SpeedModel, noise_every: int = 0,
               lost: dict[int, float] | None = None) -> bool:
        """Whether the run's report is in the cache (a damaged one is not: it is rerun)."""
        return self._read(self.key(spec, speed, noise_every, lost)) is not None

    def __call__(self, spec: RunSpec, speed: SpeedModel, noise_every: int = 0,
                 lost: dict[int, float] | None = None) -> report.Report:
        """The run's report, from the cache or run now (and kept); with ``noise_every``,
        B_simple measured every that many steps too (``noise_scale``)."""
        key = self.key(spec, speed, noise_every, lost)
        found = self._read(key)
        if found is None:
            found = run_report(self.pool, spec, speed, self.source, noise_every, lost, key=key)
            report.write(self.root / f"{key}.json", found)
            self.host_s += found["host_s"]
        return found

    def export(self, spec: RunSpec, speed: SpeedModel, path: str | os.PathLike
               ) -> dict[str, Any]:
        """Run ``spec`` again (a run is the same every time: seeded, one thread) and write its
        exported average to ``path`` as a final.pt; the run's last held-out record."""
        result = run(self.pool, spec, speed)
        export_final(path, self.pool, spec, result)
        return result.records[-1]

    def _read(self, key: str) -> report.Report | None:
        """The report named ``key``; one the studies' cache wrote before the reports were one
        layout calls B_simple ``noise``, read as ``noise_scale`` (the file is left as it is)."""
        found = report.read(self.root / f"{key}.json")
        if found is not None and "noise" in found:
            found["noise_scale"] = found.pop("noise")
        return found
