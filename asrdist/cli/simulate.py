"""asrdist-simulate: N learners of one strategy in one process on a simulated clock."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import click
import torch

from asrdist.cli import command
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.models.build import ModelConfig
from asrdist.parallel import registry
from asrdist.parallel.options import CommonOptions
from asrdist.simulate.corpus import ChunkPool
from asrdist.simulate.experiment import RunSpec, run
from asrdist.simulate.speed import SpeedModel
from asrdist.train.config import FIELDS, coerce_option

_EXCHANGE = {f.name for f in dataclasses.fields(CommonOptions)}


@command()
@click.option("--data", required=True, type=click.Path(exists=True), help="Kaldi data dir")
@click.option("--targets", required=True, type=click.Path(exists=True),
              help="ingested alignment dir (asrdist-ingest-ali)")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False),
              help="JSON file for the records and the summary")
@click.option("--algo", default="ssgd", show_default=True, help="an asrdist-train --algo")
@click.option("--learners", default=16, show_default=True, type=click.IntRange(1))
@click.option("--batch-size", default=16, show_default=True, type=click.IntRange(1),
              help="chunks per learner per step")
@click.option("--epochs", default=1.0, show_default=True, type=click.FloatRange(0, min_open=True))
@click.option("--lr", default=0.1, show_default=True, type=float)
@click.option("--momentum", default=0.9, show_default=True, type=float)
@click.option("--grad-clip", default=5.0, show_default=True, type=float)
@click.option("--layers", default=1, show_default=True, type=click.IntRange(1), help="BLSTM layers")
@click.option("--units", default=64, show_default=True, type=click.IntRange(1),
              help="BLSTM cells per direction")
@click.option("--chunk-len", default=21, show_default=True, type=click.IntRange(1))
@click.option("--heldout-utts", default=100, show_default=True, type=click.IntRange(1))
@click.option("--max-utts", default=0, show_default=True, type=click.IntRange(0),
              help="training utterances to keep (0 = all)")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--evals", default=4, show_default=True, type=click.IntRange(1))
@click.option("--compute-s", default=1.0, show_default=True, type=float,
              help="simulated seconds of forward and backward a step")
@click.option("--update-s", default=0.0, show_default=True, type=float,
              help="simulated seconds of optimizer step and data loading a step")
@click.option("--jitter", default=0.0, show_default=True, type=float,
              help="relative spread of the compute time (log-normal, mean one)")
@click.option("--slow-learner", default=None, help="RANK:FACTOR, one learner FACTOR x slower")
@click.option("--latency", default=0.0, show_default=True, type=float,
              help="seconds per message")
@click.option("--bandwidth", default=float("inf"), type=float, help="bytes/s per link")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(1),
              help="torch CPU threads (small models run fastest on one)")
@click.option("--option", "-O", "options", multiple=True, metavar="NAME=VALUE",
              help="a strategy option, e.g. -O avg_period=8 -O learners_per_node=4")
@click.option("--noise-scale-every", default=0, type=click.IntRange(0), help="B_simple, every K")
def main(data: str, targets: str, out: str, algo: str, learners: int, batch_size: int,
         epochs: float, lr: float, momentum: float, grad_clip: float, layers: int, units: int,
         chunk_len: int, heldout_utts: int, max_utts: int, seed: int, evals: int,
         compute_s: float, update_s: float, jitter: float, slow_learner: str | None,
         latency: float, bandwidth: float, threads: int, options: tuple[str, ...],
         noise_scale_every: int) -> None:
    """Train LEARNERS simulated learners of ALGO on DATA and write held-out CE/accuracy
    against simulated time, steps and epochs, staleness and waits to OUT."""
    try:
        registry.spec(algo)  # before the corpus loads, and before -O is read against it
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--algo") from None
    torch.set_num_threads(threads)
    speed = SpeedModel.with_slow(slow_learner, compute_s=compute_s, update_s=update_s,
                                 jitter=jitter, latency_s=latency, bandwidth=bandwidth,
                                 seed=seed)
    spec = RunSpec(algo=algo, learners=learners, batch=batch_size, epochs=epochs, lr=lr,
                   momentum=momentum, grad_clip=grad_clip,
                   model=ModelConfig(layers=layers, units=units),
                   options=_parse_options(algo, options), seed=seed, evals=evals)
    pool = ChunkPool.load(data, targets, chunk_len, heldout_utts, seed=seed, max_utts=max_utts)
    result = run(pool, spec, speed, noise_scale_every)
    with atomic_write(out) as f:
        json.dump({"spec": {**spec.__dict__, "model": spec.model.to_dict()},
                   "records": result.records, "summary": result.summary,
                   **({"noise_scale": result.noise} if noise_scale_every else {})}, f, indent=1)
    for r in result.records:
        click.echo(f"t={r['time_s']:.1f}s steps={r['steps']:.0f} epochs={r['epochs']:.2f} "
                   f"ce={r['heldout_ce']:.4f} acc={r['heldout_acc']:.4f} "
                   f"dist={r['dist_to_mean']:.4g}")
    click.echo(f"host {result.summary['host_s']:.1f} s; {out}", err=True)


def _parse_options(algo: str, items: tuple[str, ...]) -> dict[str, Any]:
    """``NAME=VALUE`` pairs typed as asrdist-train types them. Only the strategy's own options
    are taken: those named like training options have flags here (--seed, --batch-size), and
    the options of real exchanges (timeouts, distance sampling, a slow learner) mean nothing
    to the simulator, whose slow learner is --slow-learner."""
    taken = [n for n in registry.options_of(algo) if n not in FIELDS and n not in _EXCHANGE]
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in taken:
            hint = "; a slow learner is --slow-learner" if name == "slow_learner" else ""
            raise click.BadParameter(f"{item!r}: expected NAME=VALUE, NAME one of "
                                     f"{', '.join(taken) or 'none'}{hint}",
                                     param_hint="--option")
        try:
            out[name] = coerce_option(name, value, f"-O {item}")
        except AsrdistError as e:
            raise click.BadParameter(str(e), param_hint="--option") from None
    return out
