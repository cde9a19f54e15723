"""asrdist-decode: hybrid (final.pt) or GMM (final.mdl) decoding of a data dir over HCLG, to
lattices (steps/nnet3/decode.sh) and the LM-weight x penalty sweep on them (score_sclite.sh)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from asrdist.cli import command, number_list
from asrdist.decode.acoustic import Chunking
from asrdist.decode.decode_dir import S5C_LMWTS, S5C_WIPS, decode_data_dir
from asrdist.decode.lattice import LatticeOptions
from asrdist.jobs.cmd import Cmd, cmd_option
from asrdist.stage import Skipped


def chunking_options(f):
    """--frames-per-chunk, --extra-left-context, --extra-right-context (nnet3-compute's)."""
    f = click.option("--extra-right-context", type=click.IntRange(min=0), default=None,
                     help="Frames after each chunk the BLSTM sees, outputs dropped (default: "
                          "its training chunk-right-context).")(f)
    f = click.option("--extra-left-context", type=click.IntRange(min=0), default=None,
                     help="Frames before each chunk the BLSTM sees, outputs dropped (default: "
                          "its training chunk-left-context).")(f)
    return click.option("--frames-per-chunk", type=click.IntRange(min=0), default=None,
                        help="Frames the network scores per chunk (default: its training "
                             "chunk_len; 0: whole utterances).")(f)


@command()
@click.option("--graph", "graph_dir", required=True, type=click.Path(file_okay=False),
              help="Graph dir with HCLG.fst and words.txt (ours or Kaldi's).")
@click.option("--model", "nnet", default=None, type=click.Path(dir_okay=False),
              help="Hybrid acoustic model: asrdist final.pt.")
@click.option("--gmm", default=None, type=click.Path(dir_okay=False),
              help="GMM baseline instead: a Kaldi GMM final.mdl (e.g. exp/mono/final.mdl).")
@click.option("--loglikes", default=None, type=click.Path(dir_okay=False),
              help="Kept network scores (asrdist-compute-loglikes' loglikes.scp) instead of "
                   "--model: a sweep that never re-runs the network.")
@click.option("--trans-mdl", default=None, type=click.Path(dir_okay=False),
              help="final.mdl holding the transition model (default: GRAPH/final.mdl).")
@click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False),
              help="Test data dir with feats.scp (fbank for --model, mfcc for --gmm).")
@click.option("--acwt", default=0.1, show_default=True,
              help="Acoustic scale of the search (the main text and ctm: LMWT 1/acwt).")
@click.option("--beam", default=15.0, show_default=True, help="Decoding beam.")
@click.option("--lattice-beam", default=8.0, show_default=True,
              help="Lattice beam: paths kept within it of the best.")
@click.option("--lmwt", "lmwts", default=" ".join(map(str, S5C_LMWTS)), show_default=True,
              help="Sweep: LM weights, each read off the lattices into score_LMWT_WIP/ "
                   "('': none).")
@click.option("--wip", "wips", default=" ".join(map(str, S5C_WIPS)), show_default=True,
              help="Sweep: word insertion penalties.")
@click.option("--nj", default=1, show_default=True, help="Parallel decoding jobs.")
@cmd_option
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Decode dir: lat.N.gz, num_jobs, text, ctm, score_*/{text,ctm}, "
                   "log/decode.log.")
@chunking_options
def main(graph_dir: str, nnet: str | None, gmm: str | None, loglikes: str | None,
         trans_mdl: str | None,
         data_dir: str, acwt: float, beam: float, lattice_beam: float,
         lmwts: str, wips: str, nj: int, cmd: Cmd, out_dir: str, frames_per_chunk: int | None,
         extra_left_context: int | None, extra_right_context: int | None) -> None:
    """Decode DATA with the acoustic model over the graph, once, to Kaldi's lattices; the
    sweep's texts and CTMs read off them.

    A rerun skips an --out done with the same options (--nj and --cmd aside) and the same model,
    graph dir and data dir files, and redoes it otherwise."""
    summary = decode_data_dir(
        graph_dir, data_dir, out_dir, nnet=nnet, gmm=gmm, trans_mdl=trans_mdl,
        opts=LatticeOptions(acwt, beam, lattice_beam),
        lmwts=number_list(lmwts, "--lmwt"), wips=number_list(wips, "--wip") or [0.0], nj=nj,
        command=shlex.join(["asrdist-decode", *sys.argv[1:]]), loglikes=loglikes,
        chunking=Chunking(frames_per_chunk, extra_left_context, extra_right_context),
        runner=cmd.make(Path(out_dir) / "log"),
    )
    if not isinstance(summary, Skipped):  # done already: asrdist.stage logged the skip line
        click.echo(summary.line(), err=True)


if __name__ == "__main__":
    main()
