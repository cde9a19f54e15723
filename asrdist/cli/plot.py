"""asrdist-plot: PNG curves (loss, held-out CE vs wall time and epochs) of one or more run dirs
or asrdist-simulate reports."""

from __future__ import annotations

import click

from asrdist.cli import command
from asrdist.train.plot import plot_runs


@command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--out", "-o", default="curves.png", show_default=True,
              type=click.Path(dir_okay=False), help="PNG file to write")
@click.option("--all-ranks", is_flag=True, help="a curve per learner, not only rank 0")
def main(runs: tuple[str, ...], out: str, all_ranks: bool) -> None:
    """Compare the training curves of RUNS (asrdist-train run dirs, asrdist-simulate JSON
    reports) in one PNG."""
    click.echo(plot_runs(list(runs), out, rank0_only=not all_ranks), err=True)


if __name__ == "__main__":
    main()
