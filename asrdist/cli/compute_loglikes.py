"""asrdist-compute-loglikes: run the network once over a data dir and keep its scores."""

from __future__ import annotations

from pathlib import Path

import click

from asrdist.cli import command
from asrdist.cli.options import derived_command, flags_of, made
from asrdist.decode.acoustic import Chunking
from asrdist.decode.loglikes import COMPRESSION, LOG_DIR, compute_loglikes
from asrdist.jobs.cmd import Cmd, cmd_option


@command(cls=derived_command(lambda: flags_of(Chunking)))
@click.option("--model", "nnet", required=True, type=click.Path(dir_okay=False),
              help="asrdist final.pt.")
@click.option("--data", "data_dir", required=True, type=click.Path(file_okay=False),
              help="Data dir with feats.scp (as for asrdist-decode --model).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Where loglikes.{ark,scp} and num_pdfs go.")
@click.option("--nj", default=1, show_default=True, type=int,
              help="Parallel jobs, each scoring a contiguous part of the utterances.")
@click.option("--compress", default="2byte", show_default=True,
              type=click.Choice(list(COMPRESSION)),
              help="Kaldi compressed matrices: 2byte (16 bits a score, about 1e-3 nats off), "
                   "1byte (8 bits on per-pdf quartiles, 4x smaller than none), none (float32).")
@click.option("--device", default="cpu", show_default=True,
              help="Where each job runs the network: cpu, cuda (the job's first visible GPU) "
                   "or cuda:N.")
@cmd_option
def main(nnet: str, data_dir: str, out_dir: str, nj: int, compress: str, device: str, cmd: Cmd,
         **chunking: int | None) -> None:
    """Pseudo log-likelihoods (log posterior - log prior) of every utterance, as Kaldi's
    nnet3-compute writes them, for asrdist-decode --loglikes: an LM-weight sweep without
    re-running the network. A rerun skips an --out done with the same options (--nj and --cmd
    aside) and inputs, writing nothing. The --nj jobs' parts are joined into one ark and scp,
    the same as one job's; a slurm.pl job logs to OUT/.log/loglikes.N.log (hidden, so that
    asrdist-decode --loglikes does not take the logs for a change of its input). --data's
    features are refused when their feats_config.json differs from the one the --model was
    trained on; a model or data dir that records none is not checked."""
    compute_loglikes(nnet, data_dir, out_dir,
                     made(Chunking, chunking),
                     nj=nj, runner=cmd.make(Path(out_dir) / LOG_DIR), compress=compress,
                     device=device)


if __name__ == "__main__":
    main()
