"""asrdist-pretrain-rbm: features -> dbn.pt, a stack of RBMs for asrdist-train --init-dbn.

Run directly for one learner, or under torchrun / mpiexec / srun for several, which then
average their RBMs every --avg-period minibatches (asrdist.train.pretrain). Several learners
are launched, supervised and ended on a failure as asrdist-train's are.
"""

from __future__ import annotations

from typing import Any

import click

from asrdist.cli import command
from asrdist.cli.options import click_option, derived_command, given_or_default
from asrdist.options import declared, make
from asrdist.parallel.launch.learner import run_learner
from asrdist.parallel.processes.preempt import Preemption
from asrdist.parallel.strategy import Learner
from asrdist.stage import Skipped
from asrdist.train.pretrain import PretrainConfig, pretrain


def _flags() -> list[click.Option]:
    """A flag per option of PretrainConfig, from its declaration."""
    return [click_option(name, f) for name, f in declared(PretrainConfig).items()]


@command(cls=derived_command(_flags))
def main(**values: Any) -> None:
    """Pretrain a sigmoid DNN's hidden layers as RBMs (Gaussian-Bernoulli, then
    Bernoulli-Bernoulli, CD-1), layer by layer."""
    cfg = make(PretrainConfig, given_or_default(declared(PretrainConfig), values))

    def work(learner: Learner, device: str, _: Preemption) -> None:
        cfg.device = device
        path = pretrain(cfg, learner)
        if learner.rank == 0 and not isinstance(path, Skipped):  # Skipped: the skip is logged
            click.echo(str(path), err=True)

    run_learner(cfg.device, cfg.process_options(), work, run_dir=cfg.out)


if __name__ == "__main__":
    main()
