"""What the simulator studies share: cached runs, the corpus in memory, the study options, the
model and hadpsgd's nodes."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import torch

from asrdist.fsutil import atomic_write
from asrdist.models.build import ModelConfig
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec, run
from asrdist.simulate.export import export_final
from asrdist.simulate.speed import SpeedModel

# hadpsgd as the simulator studies run it: super-learners of 4 GPUs (a node) on a random ring
HADPSGD_NODES_OF_4 = {"learners_per_node": 4, "hadpsgd_variant": "random"}


class Runner:
    """Runs a :class:`RunSpec` on the pool once; the result is cached in ``cache`` by the
    spec's and speed model's values, so an interrupted study resumes where it stopped."""

    def __init__(self, data: str, targets: str, cache: str, max_utts: int = 0,
                 heldout_utts: int = 100) -> None:
        torch.set_num_threads(1)
        self.pool = ChunkPool.load(data, targets, heldout_utts=heldout_utts, max_utts=max_utts)
        self.cache = Path(cache)
        self.cache.mkdir(parents=True, exist_ok=True)
        self.host_s = 0.0

    def _values(self, spec: RunSpec, speed: SpeedModel, noise_every: int = 0) -> dict[str, Any]:
        values = {**dataclasses.asdict(spec), "speed": dataclasses.asdict(speed),
                  "chunks": len(self.pool.train)}
        if noise_every:  # only then: the runs cached before it keep their keys
            values["noise_every"] = noise_every
        return values

    def _path(self, values: dict[str, Any]) -> Path:
        key = hashlib.md5(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()
        return self.cache / f"{key}.json"

    def key(self, spec: RunSpec, speed: SpeedModel) -> str:
        """The name ``spec``'s result has in the cache."""
        return self._path(self._values(spec, speed)).stem

    def export(self, spec: RunSpec, speed: SpeedModel, path: str | Path) -> dict[str, Any]:
        """Run ``spec`` again (a run is the same every time: seeded, one thread) and write its
        exported average to ``path`` as a final.pt; the run's last held-out record."""
        res = run(self.pool, spec, speed)
        export_final(path, self.pool, spec, res)
        return res.records[-1]

    def cached(self, spec: RunSpec, speed: SpeedModel, noise_every: int = 0) -> bool:
        """Whether ``spec``'s result is in the cache already."""
        return self._path(self._values(spec, speed, noise_every)).exists()

    def __call__(self, spec: RunSpec, speed: SpeedModel, noise_every: int = 0) -> dict[str, Any]:
        """The run's records and summary; with ``noise_every``, B_simple measured every that
        many steps too (``noise``)."""
        values = self._values(spec, speed, noise_every)
        path = self._path(values)
        if path.exists():
            return json.loads(path.read_text())
        t0 = time.perf_counter()
        res = run(self.pool, spec, speed, noise_every)
        out = {"spec": values, "records": res.records, "summary": res.summary,
               "host_s": time.perf_counter() - t0}
        if noise_every:
            out["noise"] = res.noise
        self.host_s += out["host_s"]
        with atomic_write(path) as f:
            json.dump(out, f)
        return out


def small_blstm() -> ModelConfig:
    """The studies' model: a 1x64 BLSTM (the demo's is 2x128)."""
    return ModelConfig(layers=1, units=64)


def final_ce(result: dict[str, Any]) -> float:
    return result["records"][-1]["heldout_ce"]


def corpus_options(ap: argparse.ArgumentParser) -> None:
    """The options every study takes: the corpus, its subset and the run cache."""
    ap.add_argument("--data", required=True, help="train_fbank of the mini recipe")
    ap.add_argument("--targets", required=True, help="mono_pdf of the mini recipe")
    ap.add_argument("--cache", default="/tmp/asrdist-studies", help="finished runs, by spec")
    ap.add_argument("--max-utts", type=int, default=0, help="training utterances (0 = all)")
    ap.add_argument("--hours", default="5", help="the corpus's size, for the section's text")
