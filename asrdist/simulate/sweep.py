"""Strategies x scenarios x seeds on one corpus in memory, each run's report in a file of its
own, so an interrupted comparison resumes where it stopped.

Every run of one seed starts from the same weights and reads the same batches (the run's seed
seeds both, :func:`asrdist.simulate.experiment.run`), and every run is scored on the same
held-out chunks (the pool is loaded once): the runs of one seed differ in their strategy and
scenario only, so their differences are paired. A run's file is named by its cell and holds the
key of what it was run with (spec, speed model, data); a rerun takes a file whose key matches
and reruns a cell whose file is missing or was run with other values.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from asrdist.errors import AsrdistError
from asrdist.simulate import guards, report
from asrdist.simulate.cache import run_key, run_report
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec, strategy_options
from asrdist.simulate.grid import Arm, Scenario
from asrdist.simulate.run import simulate
from asrdist.simulate.speed import SpeedModel
from asrdist.simulate.tensorboard import write_records


@dataclass(frozen=True)
class Cell:
    """One run of a comparison."""

    arm: Arm
    scenario: Scenario
    seed: int

    def __str__(self) -> str:
        return f"{self.arm.label} | {self.scenario.label} | seed {self.seed}"

    def file_name(self) -> str:
        """A file name that says which run it holds."""
        words = (self.arm.label, self.scenario.label, f"seed{self.seed}")
        return "__".join(re.sub(r"[^\w.=-]+", "_", w) for w in words) + ".json"


def cells(arms: list[Arm], scenarios: list[Scenario], seeds: list[int]) -> list[Cell]:
    """Seed by seed, so that the first seeds of every strategy and scenario come first."""
    return [Cell(a, s, k) for k in seeds for s in scenarios for a in arms]


class Sweep:
    """Runs cells of ``base`` (a spec whose strategy, options and seed each cell sets) under
    ``speed`` (whose slow learners each scenario sets) on ``pool``, keeping each run's report
    in ``runs_dir``; ``source`` says where the pool came from; ``say`` takes progress lines;
    ``tensorboard``: each cell's held-out records also as event files in a directory of
    its own there, written when the cell runs (or where its directory is missing)."""

    def __init__(self, pool: ChunkPool, base: RunSpec, speed: SpeedModel, runs_dir: Path,
                 source: dict[str, Any], say: Callable[[str], None],
                 tensorboard: Path | None = None) -> None:
        self.pool, self.base, self.speed, self.runs_dir = pool, base, speed, runs_dir
        self.source, self.say, self.tensorboard = source, say, tensorboard

    def check(self, arms: list[Arm]) -> None:
        """Refuse a strategy that cannot run with these learners and speed model (an option
        out of range, groups that need nodes) before any run: each is wrapped and ended, no
        step taken, on a one-weight model."""
        for arm in arms:
            spec = dataclasses.replace(self.base, algo=arm.algo, options=arm.options)
            try:
                simulate(arm.algo, spec.learners, 0, lambda i: torch.nn.Linear(1, 1),
                         lambda m: torch.optim.SGD(m.parameters(), lr=0.0),
                         lambda i, k, m: m.weight.sum(), speed=self.speed,
                         options=strategy_options(spec, self.pool))
            except (AsrdistError, ValueError) as e:
                raise AsrdistError(f"--algo {arm.label}: {e}") from None

    def spec(self, cell: Cell) -> RunSpec:
        return dataclasses.replace(self.base, algo=cell.arm.algo, options=cell.arm.options,
                                   seed=cell.seed, eval_start=True)

    def speed_of(self, cell: Cell) -> SpeedModel:
        return dataclasses.replace(self.speed, slow=cell.scenario.slow, seed=cell.seed)

    def key(self, cell: Cell) -> str:
        """What the run's figures depend on, hashed (:func:`run_key`)."""
        return run_key(self.spec(cell), self.speed_of(cell),
                       {**self.source, **self.pool.describe()}, cell.scenario.lost)

    def __call__(self, todo: list[Cell]) -> list[dict[str, Any]]:
        """Every cell's report, run or taken from its file, with a line for each."""
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        reports = []
        for n, cell in enumerate(todo, 1):
            path, key = self.runs_dir / cell.file_name(), self.key(cell)
            found = report.read(path)
            if found is not None and found.get("key") == key:
                how = "kept"
            else:
                found = self._run(cell, key)
                report.write(path, found)
                how = f"host {found['host_s']:.1f} s"
            self._write_events(cell, found, fresh=how != "kept")
            final, failed = found["records"][-1], found.get("failed")
            if failed is not None:
                self.say(f"[{n}/{len(todo)}] {cell}: failed at {failed['time_s']:.4g} s "
                         f"simulated: {failed['why']} ({how})")
            else:
                self.say(f"[{n}/{len(todo)}] {cell}: final CE {final['heldout_ce']:.4f} at "
                         f"{final['time_s']:.4g} s simulated ({how})")
            divergence = guards.diverged(found["records"])
            if divergence is not None:
                self.say(f"[{n}/{len(todo)}] {cell}: warning: {divergence}")
            reports.append(found)
        return reports

    def _write_events(self, cell: Cell, found: dict[str, Any], fresh: bool) -> None:
        if self.tensorboard is None:
            return
        logdir = self.tensorboard / cell.file_name().removesuffix(".json")
        if (fresh or not logdir.exists()) and not write_records(logdir, found["records"]):
            self.tensorboard = None  # no tensorboard package: said once, tried no more

    def _run(self, cell: Cell, key: str) -> dict[str, Any]:
        return run_report(self.pool, self.spec(cell), self.speed_of(cell), self.source,
                          lost=cell.scenario.lost, key=key, strategy=cell.arm.label,
                          scenario=cell.scenario.label, seed=cell.seed)
