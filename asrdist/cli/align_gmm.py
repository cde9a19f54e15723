"""asrdist-align-gmm: flat-start monophone GMM-HMM (train_mono.sh) writing a Kaldi alignment dir."""

from __future__ import annotations

from pathlib import Path

import click

from asrdist.cli import command
from asrdist.gmm.train_mono import MonoOptions, train_mono
from asrdist.stage import Skipped


@command()
@click.argument("data_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("lang_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("exp_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--nj", default=2, show_default=True,
              help="Parallel jobs (processes); a rerun with another --nj alone is skipped.")
@click.option("--num-iters", default=MonoOptions.num_iters, show_default=True,
              help="EM passes (Kaldi: 40).")
@click.option("--total-gauss", default=MonoOptions.total_gauss, show_default=True,
              help="Target number of Gaussians in total.")
@click.option("--max-utts", type=int, default=None,
              help="Train on the shortest N utterances only (Kaldi's train_10kshort); "
                   "all are aligned at the end.")
@click.option("--boost-silence", default=MonoOptions.boost_silence, show_default=True,
              help="Scale the optional-silence models' likelihoods by this when aligning "
                   "(gmm-boost-silence; WSJ's run.sh: 1.25).")
@click.option("--map-oov/--no-map-oov", default=False, show_default=True,
              help="Map transcript words missing from words.txt to the OOV word "
                   "instead of failing.")
@click.option("--seed", default=0, show_default=True,
              help="Seed of the mixing up's perturbations: the same seed, the same model; "
                   "others show the run-to-run spread.")
def main(data_dir: Path, lang_dir: Path, exp_dir: Path, nj: int, num_iters: int,
         total_gauss: int, max_utts: int | None, boost_silence: float, map_oov: bool,
         seed: int) -> None:
    """Train a monophone system on DATA_DIR (MFCC feats.scp + cmvn.scp, text) with LANG_DIR
    and write EXP_DIR: ali.N.gz, final.mdl, tree, num_jobs, phones.txt, log/. Skips a
    finished EXP_DIR."""
    opts = MonoOptions(nj=nj, num_iters=num_iters, total_gauss=total_gauss, max_utts=max_utts,
                       map_oov=map_oov, boost_silence=boost_silence, seed=seed)
    summary = train_mono(data_dir, lang_dir, exp_dir, opts)
    if isinstance(summary, Skipped):  # done already: asrdist.stage logged the skip line
        return
    last = summary.iters[-1]
    click.echo(
        f"{exp_dir}: {summary.aligned}/{summary.num_utts} utterances aligned "
        f"({len(summary.failed)} failed), log-like/frame {last.log_like_per_frame:.3f}, "
        f"{last.num_gauss} gaussians, {summary.seconds:.0f} s",
        err=True,
    )


if __name__ == "__main__":
    main()
