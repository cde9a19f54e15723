"""asrdist-train-deltas, asrdist-train-lda-mllt and asrdist-train-sat: tied-triphone GMM-HMMs
from a previous system's alignments (Kaldi's steps/train_deltas.sh, tri1,
steps/train_lda_mllt.sh, tri2b, and steps/train_sat.sh, tri3b), each writing a Kaldi alignment
dir."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from asrdist.cli import command, number_list
from asrdist.gmm.train_deltas import DeltasOptions, DeltasSummary, train_deltas
from asrdist.gmm.train_lda_mllt import LdaMlltOptions, train_lda_mllt
from asrdist.gmm.train_sat import SatOptions, train_sat
from asrdist.stage import Skipped

_OPTIONS = [
    click.argument("data_dir", type=click.Path(file_okay=False, path_type=Path)),
    click.argument("lang_dir", type=click.Path(file_okay=False, path_type=Path)),
    click.argument("ali_dir", type=click.Path(file_okay=False, path_type=Path)),
    click.argument("exp_dir", type=click.Path(file_okay=False, path_type=Path)),
    click.option("--num-leaves", default=DeltasOptions.num_leaves, show_default=True,
                 help="Most leaves (tied states: the networks' pdfs) the tree may have."),
    click.option("--total-gauss", default=DeltasOptions.total_gauss, show_default=True,
                 help="Target number of Gaussians in total."),
    click.option("--nj", default=2, show_default=True,
                 help="Parallel jobs (processes); a rerun with another --nj alone is skipped."),
    click.option("--num-iters", default=DeltasOptions.num_iters, show_default=True,
                 help="EM passes (Kaldi: 35); Gaussians are added on the first 5/7 of them."),
    click.option("--realign-iters", default="10 20 30", show_default=True,
                 help="Passes that realign first."),
    click.option("--boost-silence", default=1.0, show_default=True,
                 help="Scale the optional-silence models' likelihoods by this when aligning."),
    click.option("--map-oov/--no-map-oov", default=False, show_default=True,
                 help="Map transcript words missing from words.txt to the OOV word."),
    click.option("--seed", default=0, show_default=True,
                 help="Seed of the mixing up's perturbations: the same seed, the same model; "
                      "others show the run-to-run spread."),
]


def _tri_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for decorate in reversed(_OPTIONS):
        fn = decorate(fn)
    return fn


def _common(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The options both trainers take, from the command line's values."""
    iters = tuple(int(x) for x in number_list(kwargs["realign_iters"], "--realign-iters"))
    return {"nj": kwargs["nj"], "num_leaves": kwargs["num_leaves"],
            "total_gauss": kwargs["total_gauss"], "num_iters": kwargs["num_iters"],
            "max_iter_inc": kwargs["num_iters"] * 5 // 7,  # train_deltas.sh: 25 of 35
            "realign_iters": iters, "boost_silence": kwargs["boost_silence"],
            "map_oov": kwargs["map_oov"], "seed": kwargs["seed"]}


def _report(exp_dir: Path, summary: DeltasSummary | Skipped) -> None:
    if isinstance(summary, Skipped):  # done already: asrdist.stage logged the skip line
        return
    last = summary.iters[-1]
    click.echo(
        f"{exp_dir}: {summary.tree.leaves} leaves, {summary.aligned}/{summary.num_utts} "
        f"utterances aligned ({len(summary.failed)} failed), log-like/frame "
        f"{last.log_like_per_frame:.3f}, {last.num_gauss} gaussians, {summary.seconds:.0f} s",
        err=True,
    )


@command()
@_tri_options
def deltas_main(**kwargs: Any) -> None:
    """Train a triphone system on DATA_DIR (MFCC feats.scp + cmvn.scp, text) with LANG_DIR
    from ALI_DIR's alignments (e.g. exp/mono) and write EXP_DIR: tree, final.mdl, ali.N.gz,
    questions.int, log/. Skips a finished EXP_DIR."""
    opts = DeltasOptions(**_common(kwargs))
    _report(kwargs["exp_dir"], train_deltas(kwargs["data_dir"], kwargs["lang_dir"],
                                            kwargs["ali_dir"], kwargs["exp_dir"], opts))


@command()
@_tri_options
@click.option("--dim", default=LdaMlltOptions.dim, show_default=True,
              help="LDA output dimension (below the number of the previous system's pdfs).")
@click.option("--mllt-iters", default="2 4 6 12", show_default=True,
              help="Passes that estimate an MLLT transform.")
def lda_mllt_main(**kwargs: Any) -> None:
    """Train an LDA+MLLT triphone system on DATA_DIR (MFCC feats.scp + cmvn.scp, text) with
    LANG_DIR from ALI_DIR's alignments (e.g. exp/tri1) and write EXP_DIR: final.mat,
    splice_opts, tree, final.mdl, ali.N.gz, log/. Skips a finished EXP_DIR."""
    mllt = tuple(int(x) for x in number_list(kwargs["mllt_iters"], "--mllt-iters"))
    opts = LdaMlltOptions(**_common(kwargs), dim=kwargs["dim"], mllt_iters=mllt)
    _report(kwargs["exp_dir"], train_lda_mllt(kwargs["data_dir"], kwargs["lang_dir"],
                                              kwargs["ali_dir"], kwargs["exp_dir"], opts))


@command()
@_tri_options
@click.option("--fmllr-iters", default="2 4 6 12", show_default=True,
              help="Passes that re-estimate the speakers' fMLLR transforms.")
@click.option("--silence-weight", default=SatOptions.silence_weight, show_default=True,
              help="Weight of silence frames in the fMLLR statistics.")
def sat_main(**kwargs: Any) -> None:
    """Train a speaker-adapted (fMLLR, SAT) triphone system on DATA_DIR (MFCC feats.scp +
    cmvn.scp, text, utt2spk) with LANG_DIR from ALI_DIR's alignments (e.g. exp/tri1 or
    exp/tri2) and write EXP_DIR: trans.ark (the training speakers' transforms), tree,
    final.mdl, ali.N.gz, log/, and ALI_DIR's final.mat. Skips a finished EXP_DIR."""
    iters = tuple(int(x) for x in number_list(kwargs["fmllr_iters"], "--fmllr-iters"))
    opts = SatOptions(**_common(kwargs), fmllr_iters=iters,
                      silence_weight=kwargs["silence_weight"])
    _report(kwargs["exp_dir"], train_sat(kwargs["data_dir"], kwargs["lang_dir"],
                                         kwargs["ali_dir"], kwargs["exp_dir"], opts))
