"""asrdist-score: Kaldi %WER lines, per-subset tables and sclite trn files for hypotheses."""

from __future__ import annotations

import logging
import shlex
import sys

import click

from asrdist.cli import command
from asrdist.decode.report import logged_commands, subset_table, update_results
from asrdist.decode.score import kaldi_wer_report, score_hypotheses, wer_line


@command()
@click.argument("ref_text", type=click.Path(dir_okay=False))
@click.argument("hyp", type=click.Path())
@click.option("--subsets-by", default=None, metavar="spk|FILE",
              help="Per-subset table: by speaker (utt2spk beside REF_TEXT) or a 'utt subset' file.")
@click.option("--words", "words_txt", type=click.Path(dir_okay=False), default=None,
              help="words.txt: refuse hypothesis words outside it (default: HYP/words.txt).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Where wer*, best_wer, ref.trn, hyp.trn go (default: the decode dir).")
@click.option("--report", type=click.Path(dir_okay=False), default=None,
              help="Markdown results file to add this system to (e.g. exp/results.md).")
@click.option("--name", default=None, help="System name in the report (default: HYP).")
def main(ref_text: str, hyp: str, subsets_by: str | None, words_txt: str | None,
         out_dir: str | None, report: str | None, name: str | None) -> None:
    """Score HYP (a Kaldi text file, or a decode dir with text and/or score_*/text variants)
    against REF_TEXT. Missing hypotheses count as deletions; sweeps pick the best variant as
    utils/best_wer.sh does."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
    run = score_hypotheses(ref_text, hyp, out_dir, subsets_by, words_txt)
    if run.main is not None:
        click.echo(kaldi_wer_report(run.main.result, str(run.main.hyp_text)), nl=False)
    for scored in run.variants:
        click.echo(wer_line(scored.result.total, str(run.out_dir / f"wer_{scored.name}")))
    if run.best is not None:
        click.echo("best: " + wer_line(run.best.result.total,
                                        str(run.out_dir / f"wer_{run.best.name}")))
    if run.primary.result.subsets:
        click.echo(subset_table(run.primary), nl=False)
    if report is not None:
        commands = logged_commands(hyp) + [shlex.join(["asrdist-score", *sys.argv[1:]])]
        update_results(report, name or hyp, run, commands)
