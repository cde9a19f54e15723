"""asrdist-train-deltas: a tied-triphone GMM-HMM on deltas (steps/train_deltas.sh, tri1) from a
previous system's alignments, writing a Kaldi alignment dir."""

from __future__ import annotations

from pathlib import Path

import click

from asrdist.cli import command
from asrdist.gmm.train_deltas import DeltasOptions, train_deltas
from asrdist.stage import Skipped


@command()
@click.argument("data_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("lang_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("ali_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("exp_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--num-leaves", default=DeltasOptions.num_leaves, show_default=True,
              help="Most leaves (tied states, the network's pdfs) the tree may have.")
@click.option("--total-gauss", default=DeltasOptions.total_gauss, show_default=True,
              help="Target number of Gaussians in total.")
@click.option("--nj", default=2, show_default=True,
              help="Parallel jobs (processes); a rerun with another --nj alone is skipped.")
@click.option("--num-iters", default=DeltasOptions.num_iters, show_default=True,
              help="EM passes (train_deltas.sh: 35).")
@click.option("--realign-iters", default="10 20 30", show_default=True,
              help="Passes that realign first, space-separated.")
@click.option("--boost-silence", default=1.0, show_default=True,
              help="Scale the optional-silence models' likelihoods by this when aligning.")
@click.option("--map-oov/--no-map-oov", default=False, show_default=True,
              help="Map transcript words missing from words.txt to the OOV word.")
def main(data_dir: Path, lang_dir: Path, ali_dir: Path, exp_dir: Path, num_leaves: int,
         total_gauss: int, nj: int, num_iters: int, realign_iters: str, boost_silence: float,
         map_oov: bool) -> None:
    """Train a triphone system on DATA_DIR (MFCC feats.scp + cmvn.scp, text) with LANG_DIR
    from ALI_DIR's alignments (e.g. exp/mono) and write EXP_DIR: tree, final.mdl, ali.N.gz,
    questions.int, log/. Skips a finished EXP_DIR."""
    try:
        iters = tuple(int(x) for x in realign_iters.split())
    except ValueError:
        raise click.BadParameter(f"{realign_iters!r}: expected integers",
                                 param_hint="--realign-iters") from None
    opts = DeltasOptions(nj=nj, num_leaves=num_leaves, total_gauss=total_gauss,
                         num_iters=num_iters, realign_iters=iters, boost_silence=boost_silence,
                         map_oov=map_oov,
                         max_iter_inc=num_iters * 5 // 7)  # train_deltas.sh: 25 of 35 passes
    summary = train_deltas(data_dir, lang_dir, ali_dir, exp_dir, opts)
    if isinstance(summary, Skipped):
        return
    last = summary.iters[-1]
    click.echo(
        f"{exp_dir}: {summary.tree.leaves} leaves, {summary.aligned}/{summary.num_utts} "
        f"utterances aligned ({len(summary.failed)} failed), log-like/frame "
        f"{last.log_like_per_frame:.3f}, {last.num_gauss} gaussians, {summary.seconds:.0f} s",
        err=True,
    )


if __name__ == "__main__":
    main()
