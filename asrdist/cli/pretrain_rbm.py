"""asrdist-pretrain-rbm: features -> dbn.pt, a stack of RBMs for asrdist-train --init-dbn.

Run directly for one learner, or under torchrun / mpiexec / srun for several, which then
average their RBMs every --avg-period minibatches (asrdist.train.pretrain). Several learners
are launched, supervised and ended on a failure as asrdist-train's are.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import click

from asrdist.cli import command
from asrdist.parallel import launch
from asrdist.parallel.failure import failure_policy
from asrdist.parallel.supervise import supervise_under_mpiexec
from asrdist.stage import Skipped
from asrdist.train.pretrain import PretrainConfig, pretrain

_HELP = {
    "data": "features: Kaldi data dir or lhotse cuts manifest (as asrdist-train)",
    "targets": "ingested alignment dir (only to read the same utterances as asrdist-train)",
    "out": "output dir (dbn.pt, pretrain.jsonl)",
    "splice": "frames of context either side (the DNN's --splice)",
    "hidden_layers": "RBMs to stack (the DNN's --hidden-layers, or fewer)",
    "hidden_units": "hidden units per RBM (the DNN's --hidden-units)",
    "epochs": "passes over the data per Bernoulli RBM (the Gaussian first layer: twice)",
    "batch_size": "chunks per minibatch",
    "chunk_len": "frames per chunk",
    "lr": "learning rate of the Bernoulli-Bernoulli RBMs",
    "lr_gaussian": "learning rate of the Gaussian-Bernoulli first RBM",
    "momentum": "momentum at the start of each RBM",
    "momentum_high": "momentum after the first pass of each RBM",
    "l2": "weight cost (L2) of the RBM weights",
    "avg_period": "minibatches between averages of the learners' RBMs (several learners)",
    "cmvn": "spk, utt or none (as asrdist-train)",
    "cmvn_norm_vars": "normalise variances too",
    "shuffle_buffer": "chunks in the shuffle buffer",
    "seed": "seed of the weights and the data order",
    "device": "cpu, cuda or cuda:N",
    "exchange_timeout": "seconds a rendezvous or any average may take; then the job ends "
                        "naming the lost learner",
}


def _options(func: Any) -> Any:
    for f in reversed(fields(PretrainConfig)):
        flag = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            func = click.option(f"{flag}/--no-{flag[2:]}", f.name, default=f.default,
                                show_default=True, help=_HELP[f.name])(func)
            continue
        kind = {"int": int, "float": float, "str": str}[f.type if isinstance(f.type, str)
                                                       else f.type.__name__]
        required = f.name in ("data", "targets", "out")
        func = click.option(flag, f.name, type=kind, required=required,
                            default=None if required else f.default, show_default=not required,
                            help=_HELP[f.name])(func)
    return func


@command()
@_options
def main(**values: Any) -> None:
    """Pretrain a sigmoid DNN's hidden layers as RBMs (Gaussian-Bernoulli, then
    Bernoulli-Bernoulli, CD-1), layer by layer."""
    cfg = PretrainConfig(**values)
    supervise_under_mpiexec(launch.detect_env(), ())
    learner, cfg.device = launch.join_world(cfg.device, cfg.exchange_timeout)
    with failure_policy(learner):
        path = pretrain(cfg, learner)
    if learner.rank == 0 and not isinstance(path, Skipped):  # Skipped: the skip line is logged
        click.echo(str(path), err=True)


if __name__ == "__main__":
    main()
