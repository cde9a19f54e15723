"""asrdist-align-aug: alignments for an augmented data dir from the clean monophone system
(Kaldi: align_si.sh of train_sp with the clean model, copy_ali_dir.sh for rvb/noise copies)."""

from __future__ import annotations

from pathlib import Path

import click

from asrdist.cli import command
from asrdist.gmm.align_aug import align_augmented
from asrdist.stage import Skipped


@command()
@click.argument("data_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("lang_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("src_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--nj", default=2, show_default=True, help="Parallel alignment processes.")
@click.option("--boost-silence", default=1.0, show_default=True,
              help="Scale the silence models' likelihoods when realigning (gmm-boost-silence; "
                   "give what the clean system was trained with).")
@click.option("--map-oov", is_flag=True,
              help="Map words missing from words.txt to oov.int instead of failing.")
def main(data_dir: Path, lang_dir: Path, src_dir: Path, out_dir: Path, nj: int,
         boost_silence: float, map_oov: bool) -> None:
    """Align every utterance of DATA_DIR (MFCC feats.scp + cmvn.scp, text, utt2uniq) with the
    model of SRC_DIR (an asrdist-align-gmm dir): clean utterances keep SRC_DIR's alignment,
    sp<factor>- copies are realigned, other copies take their clean utterance's. Writes
    OUT_DIR as a Kaldi alignment dir (ali.N.gz, final.mdl, tree, num_jobs). Skips a finished
    OUT_DIR."""
    summary = align_augmented(data_dir, lang_dir, src_dir, out_dir, nj, map_oov=map_oov,
                              boost_silence=boost_silence)
    if isinstance(summary, Skipped):  # done already: asrdist.stage logged the skip line
        return
    click.echo(f"{out_dir}: {summary.reused} clean kept, {summary.copied} copied, "
               f"{summary.realigned} realigned, {len(summary.failed)} failed, "
               f"{summary.seconds:.0f} s", err=True)


if __name__ == "__main__":
    main()
