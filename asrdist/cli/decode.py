"""asrdist-decode: hybrid (final.pt) or GMM (final.mdl) decoding of a data dir over HCLG, to
lattices (steps/nnet3/decode.sh) and the LM-weight x penalty sweep on them (score_sclite.sh)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from asrdist.cli import command
from asrdist.cli.options import derived_command, flags_of, made
from asrdist.decode.acoustic import Chunking
from asrdist.decode.decode_dir import Sweep, decode_data_dir
from asrdist.decode.lattice import LatticeOptions
from asrdist.jobs.cmd import Cmd, cmd_option
from asrdist.stage import Skipped


@command(cls=derived_command(lambda: flags_of(LatticeOptions, Sweep, Chunking)))
@click.option("--graph", "graph_dir", required=True, type=click.Path(file_okay=False),
              help="Graph dir with HCLG.fst and words.txt (ours or Kaldi's).")
@click.option("--model", "nnet", default=None, type=click.Path(dir_okay=False),
              help="Hybrid acoustic model: asrdist final.pt.")
@click.option("--gmm", default=None, type=click.Path(dir_okay=False),
              help="GMM baseline instead: a Kaldi GMM final.mdl (e.g. exp/mono/final.mdl).")
@click.option("--fmllr", default=None, type=click.Path(dir_okay=False),
              help="A speaker-adapted --gmm's per-speaker transforms (asrdist-est-fmllr).")
@click.option("--loglikes", default=None, type=click.Path(dir_okay=False),
              help="Kept network scores (asrdist-compute-loglikes' loglikes.scp) instead of "
                   "--model: a sweep that never re-runs the network.")
@click.option("--trans-mdl", default=None, type=click.Path(dir_okay=False),
              help="final.mdl holding the transition model (default: GRAPH/final.mdl).")
@click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False),
              help="Test data dir with feats.scp (fbank for --model, mfcc for --gmm).")
@click.option("--nj", default=1, show_default=True, help="Parallel decoding jobs.")
@cmd_option
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Decode dir: lat.N.gz, num_jobs, text, ctm, score_*/{text,ctm}, "
                   "log/decode.log.")
def main(graph_dir: str, nnet: str | None, gmm: str | None, fmllr: str | None,
         loglikes: str | None,
         trans_mdl: str | None, data_dir: str, nj: int, cmd: Cmd, out_dir: str,
         **options: Any) -> None:
    """Decode DATA with the acoustic model over the graph, once, to Kaldi's lattices; the
    sweep's texts and CTMs read off them.

    A rerun skips an --out done with the same options (--nj and --cmd aside) and the same model,
    graph dir and data dir files, and redoes it otherwise. DATA's features are refused when their
    feats_config.json differs from the one the --model was trained on (another sample rate,
    kind or size); a model or DATA that records none is not checked."""
    sweep = made(Sweep, options)
    summary = decode_data_dir(
        graph_dir, data_dir, out_dir, nnet=nnet, gmm=gmm, trans_mdl=trans_mdl,
        opts=made(LatticeOptions, options), lmwts=sweep.lmwts, wips=sweep.penalties, nj=nj,
        command=shlex.join(["asrdist-decode", *sys.argv[1:]]), loglikes=loglikes,
        chunking=made(Chunking, options),
        runner=cmd.make(Path(out_dir) / "log"), fmllr=fmllr,
    )
    if not isinstance(summary, Skipped):  # done already: asrdist.stage logged the skip line
        click.echo(summary.line(), err=True)


if __name__ == "__main__":
    main()
