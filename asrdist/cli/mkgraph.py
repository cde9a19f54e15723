"""asrdist-mkgraph: n-gram LM on training transcripts (or a given grammar), then HCLG
(utils/mkgraph.sh's job)."""

from __future__ import annotations

import shlex
import sys

import click

from asrdist.cli import command
from asrdist.decode.graph import make_graph


@command()
@click.option("--lang", "lang_dir", required=True, type=click.Path(file_okay=False),
              help="Kaldi lang dir (L_disambig.fst, words.txt, phones/).")
@click.option("--model", required=True, type=click.Path(dir_okay=False),
              help="final.mdl whose transition-ids the graph will use (e.g. exp/mono/final.mdl).")
@click.option("--tree", default=None, type=click.Path(dir_okay=False),
              help="Kaldi binary tree (default: 'tree' beside --model, else a monophone tree).")
@click.option("--text", "train_text", default=None, type=click.Path(dir_okay=False),
              help="Training transcripts (Kaldi text) for the n-gram LM.")
@click.option("--grammar", default=None, type=click.Path(dir_okay=False),
              help="G instead of an LM: OpenFst text (src dst word word [cost]; state [cost]) "
                   "over the lang's words.txt, e.g. one digit per utterance.")
@click.option("--order", default=3, show_default=True, help="n-gram order.")
@click.option("--self-loop-scale", default=0.1, show_default=True,
              help="Scale on HMM self-loop probabilities (mkgraph.sh default).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Graph dir to write (lm.arpa, G.fst, HCLG.fst, words.txt, ...).")
def main(lang_dir: str, model: str, tree: str | None, train_text: str | None,
         grammar: str | None, order: int, self_loop_scale: float, out_dir: str) -> None:
    """Estimate an interpolated Kneser-Ney n-gram on --text (or read --grammar) and compile
    HCLG for --model.

    A rerun skips an --out done with the same --order and --self-loop-scale and the same
    --lang, --model, --tree and --text (or --grammar) files, and redoes it otherwise."""
    make_graph(lang_dir, model, train_text, out_dir, order, tree, self_loop_scale,
               command=shlex.join(["asrdist-mkgraph", *sys.argv[1:]]), grammar=grammar)
    click.echo(f"graph: {out_dir}/HCLG.fst", err=True)


if __name__ == "__main__":
    main()
