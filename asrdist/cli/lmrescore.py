"""asrdist-lmrescore: a decode dir's lattices rescored with a new n-gram LM, as Kaldi's
steps/lmrescore_const_arpa.sh (old LM's costs out, new ARPA LM's in), into a new decode dir."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from asrdist.cli import command
from asrdist.cli.options import click_option, derived_command, flags_of, made
from asrdist.decode.decode_dir import Sweep
from asrdist.decode.lattice import LatticeOptions
from asrdist.decode.lmrescore_dir import read_rescored_dir, rescore_decode_dir
from asrdist.jobs.cmd import Cmd, cmd_option
from asrdist.options import declared
from asrdist.stage import Skipped


def _acwt() -> dict[str, dataclasses.Field]:
    """The search's acoustic scale as asrdist-decode declares it: the main text and ctm are
    read at LMWT 1/acwt, as there."""
    return {"acwt": declared(LatticeOptions)["acwt"]}


def _flags() -> list[click.Option]:
    return [*flags_of(Sweep), *(click_option(n, f) for n, f in _acwt().items())]


@command(cls=derived_command(_flags))
@click.option("--nj", default=None, type=click.IntRange(min=1),
              help="Parallel jobs [default: IN_DIR's num_jobs, a job per lat.N.gz].")
@cmd_option
@click.option("--trans-mdl", default=None, type=click.Path(dir_okay=False),
              help="final.mdl with the transition model, for the CTMs' word times "
                   "[default: IN_DIR/../final.mdl, else OLD_LANG/final.mdl].")
@click.option("--skip-scoring", is_flag=True, help="Only the lattices (Kaldi's --skip-scoring).")
@click.argument("old_lang", type=click.Path(file_okay=False))
@click.argument("new_lm", type=click.Path())
@click.argument("data_dir", type=click.Path(file_okay=False))
@click.argument("in_dir", type=click.Path(file_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
def main(nj: int | None, cmd: Cmd, trans_mdl: str | None, skip_scoring: bool, old_lang: str,
         new_lm: str, data_dir: str, in_dir: str, out_dir: str, **options: Any) -> None:
    """Rescore IN_DIR's lat.N.gz into OUT_DIR's: OLD_LANG's G.fst scores out
    (lattice-lmrescore --lm-scale=-1), NEW_LM's in (lattice-lmrescore-const-arpa
    --lm-scale=1; NEW_LM: an ARPA file, gzipped or not, its unknown words as OLD_LANG's oov.int,
    or Kaldi's G.carpa, or a lang dir holding one), then the
    texts and CTMs read off them as asrdist-decode reads its own (text, ctm, score_LMWT_WIP/),
    so OUT_DIR is scored like any decode dir. OLD_LANG is a lang or graph dir with G.fst and
    words.txt (phones/align_lexicon.int for the CTMs); DATA is the decode's data dir. A rerun
    with the same inputs skips the rescoring."""
    sweep, acwt = made(Sweep, options), made(LatticeOptions, options).acwt  # refused up front
    rescored = rescore_decode_dir(old_lang, new_lm, in_dir, out_dir, nj,
                                  cmd.make(Path(out_dir) / "log"))
    if not isinstance(rescored, Skipped):
        kept = sum(r.done for r in rescored)
        dropped = sum(len(r.dropped) for r in rescored)
        click.echo(f"lmrescore: {kept} lattices rescored, {dropped} dropped (no path of the "
                   f"new LM), into {out_dir}", err=True)
    if not skip_scoring:
        read_rescored_dir(old_lang, data_dir, in_dir, out_dir, trans_mdl, sweep.lmwts,
                          sweep.penalties, acwt)


if __name__ == "__main__":
    main()
