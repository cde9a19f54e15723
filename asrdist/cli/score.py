"""asrdist-score, in one of two modes named first, as a Kaldi user scores:

``asrdist-score text REF_TEXT HYP``: compute-wer on Kaldi text (local/score.sh): %WER lines,
per-subset tables, sclite trn files, a results report;
``asrdist-score hubscr --stm STM --glm GLM CTM``: a CTM scored as NIST hubscr.pl scores it
(local/score_sclite.sh; with --data, every sweep point of a decode dir)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from asrdist.cli import AsrdistCommand
from asrdist.errors import AsrdistError
from asrdist.kaldi.recipes import S5C
from asrdist.score.ctm import RECIPES, default_acronym_map, read_acronym_map
from asrdist.score.hubscr import score_decode_dir, score_stm_glm_ctm
from asrdist.score.report import logged_commands, subset_table, update_results
from asrdist.score.score import kaldi_wer_report, score_hypotheses, wer_line

HELP = {"help_option_names": ["-h", "--help"]}
MODES = "'text REF_TEXT HYP' or 'hubscr --stm STM --glm GLM CTM'"


class ModeGroup(click.Group):
    """The two modes as subcommands; anything else first is refused with both shown."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            raise click.UsageError(f"{args[0]!r} is no mode: asrdist-score takes {MODES}", ctx)
        return super().parse_args(ctx, args)


@click.group(cls=ModeGroup, context_settings=HELP)
def main() -> None:
    """Score decoding output: 'text' (Kaldi's compute-wer on text, as local/score.sh) or
    'hubscr' (a CTM against an stm with a GLM, as local/score_sclite.sh and hubscr.pl)."""


@main.command("text", cls=AsrdistCommand, context_settings=HELP,
              short_help="Kaldi WER of text: compute-wer, as local/score.sh.")
@click.argument("ref_text", required=False, metavar="REF_TEXT")
@click.argument("hyp", required=False, metavar="HYP")
@click.option("--subsets-by", default=None, metavar="spk|FILE[,...]",
              help="Per-subset table: by speaker (utt2spk beside REF_TEXT) or a 'utt subset' "
                   "file; several joined by commas put an utterance in one subset of each.")
@click.option("--words", "words_txt", type=click.Path(dir_okay=False), default=None,
              help="words.txt: refuse hypothesis words outside it (default: HYP/words.txt).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Where wer*, best_wer, ref.trn, hyp.trn go (default: the decode dir).")
@click.option("--report", type=click.Path(dir_okay=False), default=None,
              help="Markdown results file to add this system to (e.g. exp/results.md).")
@click.option("--name", default=None, help="System name in the report (default: HYP).")
def text(ref_text: str | None, hyp: str | None, subsets_by: str | None, words_txt: str | None,
         out_dir: str | None, report: str | None, name: str | None) -> None:
    """Score HYP (a Kaldi text file, or a decode dir with text and/or score_*/text variants)
    against REF_TEXT (the test data dir's text), as compute-wer --text --mode=present. Missing
    hypotheses count as deletions; sweeps pick the best variant as utils/best_wer.sh does."""
    if ref_text is None or hyp is None:
        missing = "REF_TEXT and HYP" if ref_text is None else "HYP"
        raise AsrdistError("text mode needs REF_TEXT and HYP (a text file or decode dir): "
                           f"missing {missing}")
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


@main.command("hubscr", cls=AsrdistCommand, context_settings=HELP,
              short_help="A CTM against an stm and GLM: hubscr.pl, as score_sclite.sh.")
@click.argument("ctm", required=False, metavar="CTM|DECODE_DIR")
@click.option("--stm", type=click.Path(dir_okay=False), default=None,
              help="Reference stm (e.g. eval2000's). Prints Kaldi's '%WER x | #snt #wrd | corr "
                   "sub del ins err s.err | sys' lines for the set and its sw_/en_ subsets.")
@click.option("--glm", type=click.Path(dir_okay=False), default=None,
              help="The GLM word mappings applied to stm and ctm.")
@click.option("--data", "data_dir", type=click.Path(file_okay=False), default=None,
              help="With a decode dir instead of a CTM: the test data dir whose segments and "
                   "reco2file_and_channel make each ctm recording-relative (score_sclite.sh); "
                   "every sweep point is scored and the best one shown.")
@click.option("--recipe", type=click.Choice(RECIPES), default=S5C, show_default=True,
              help="With --data: whose local/score_sclite.sh stage 1 makes the ctm: s5c's "
                   "(hesitations and partial words dropped, acronyms mapped with --acronyms) "
                   "or fisher_swbd's (every dotted word split at '._', no map).")
@click.option("--acronyms", default=None, metavar="FILE|none",
              help="With --data and --recipe s5c: the acronyms.map of s5c's dict "
                   "(map_acronyms_ctm.py: u._c._l._a. -> u c l a). Default: "
                   "DATA/../local/dict_nosp/acronyms.map when it exists; 'none': no mapping.")
def hubscr(ctm: str | None, stm: str | None, glm: str | None, data_dir: str | None,
           recipe: str, acronyms: str | None) -> None:
    """Score one CTM (times relative to the recording) as hubscr.pl -h hub5 does, or with
    --data every sweep point of a decode dir as local/score_sclite.sh does; CTM.filt.sys
    files hold the Sum/Avg rows."""
    if stm is None or glm is None or ctm is None:
        missing = [arg for arg, value in (("--stm STM", stm), ("--glm GLM", glm),
                                          ("CTM|DECODE_DIR", ctm)) if value is None]
        raise AsrdistError("hubscr mode needs --stm STM, --glm GLM and a CTM (or a decode dir "
                           f"with --data): missing {', '.join(missing)}")
    if data_dir is not None:
        lines = score_decode_dir(stm, glm, ctm, data_dir, recipe=recipe,
                                 acronyms=_acronym_map(acronyms, recipe, data_dir))
    elif Path(ctm).is_dir():
        raise AsrdistError(f"{ctm} is a decode dir: give --data (its test data dir)")
    elif acronyms is not None or recipe != S5C:
        raise AsrdistError("--acronyms and --recipe make the ctm of a decode dir (with "
                           "--data); a CTM given alone is scored as it is")
    else:
        lines = score_stm_glm_ctm(stm, glm, ctm)
    for line in lines:
        click.echo(line)


def _acronym_map(option: str | None, recipe: str, data_dir: str) -> dict[str, list[str]] | None:
    """--acronyms: a file, 'none', or (not given) the s5c dict's map beside the data dir."""
    if option == "none":
        return None
    if option is not None:
        if recipe != S5C:
            raise AsrdistError(f"--acronyms goes with --recipe {S5C}: fisher_swbd's scoring "
                               "splits every dotted word without a map")
        return read_acronym_map(option)
    found = default_acronym_map(data_dir, recipe)
    if found is None:
        return None
    click.echo(f"acronyms: {found}", err=True)
    return read_acronym_map(found)


if __name__ == "__main__":
    main()
