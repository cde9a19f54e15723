"""asrdist-align-nnet: alignments from a trained network (Kaldi: steps/nnet3/align.sh), the
targets of the next one."""

from __future__ import annotations

from pathlib import Path

import click

from asrdist.cli import command
from asrdist.decode.align_nnet import align_nnet
from asrdist.stage import Skipped


@command()
@click.argument("data_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("lang_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("gmm_dir", type=click.Path(file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--model", "model_pt", required=True,
              type=click.Path(dir_okay=False, path_type=Path),
              help="The network: an asrdist-train final.pt trained on GMM_DIR's pdfs.")
@click.option("--nj", default=2, show_default=True, help="ali.N.gz files to write.")
@click.option("--map-oov", is_flag=True,
              help="Map words missing from words.txt to oov.int instead of failing.")
def main(data_dir: Path, lang_dir: Path, gmm_dir: Path, out_dir: Path, model_pt: Path, nj: int,
         map_oov: bool) -> None:
    """Align every utterance of DATA_DIR (the network's features, cmvn.scp, text) with the
    network through the graphs of GMM_DIR's final.mdl and tree (an asrdist-align-gmm or
    -align-aug dir). Writes OUT_DIR as a Kaldi alignment dir (ali.N.gz, final.mdl, tree,
    num_jobs) for asrdist-ingest-ali. Skips a finished OUT_DIR."""
    summary = align_nnet(data_dir, lang_dir, model_pt, gmm_dir, out_dir, nj, map_oov=map_oov)
    if isinstance(summary, Skipped):  # done already: asrdist.stage logged the skip line
        return
    click.echo(f"{out_dir}: {summary.aligned} aligned ({summary.frames} frames), "
               f"{len(summary.failed)} failed, {summary.seconds:.0f} s", err=True)


if __name__ == "__main__":
    main()
