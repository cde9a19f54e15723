"""asrdist-score: Kaldi %WER lines, per-subset tables and sclite trn files for hypotheses;
with --stm and --glm, a CTM scored as NIST hubscr.pl scores it (Kaldi's local/score_sclite.sh)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from asrdist.cli import command
from asrdist.decode.ctm import RECIPES, default_acronym_map, read_acronym_map
from asrdist.decode.hubscr import score_decode_dir, score_stm_glm_ctm
from asrdist.decode.report import logged_commands, subset_table, update_results
from asrdist.decode.score import kaldi_wer_report, score_hypotheses, wer_line
from asrdist.errors import AsrdistError
from asrdist.kaldi.recipes import S5C


@command()
@click.argument("paths", nargs=-1, metavar="REF_TEXT HYP | --stm STM --glm GLM CTM")
@click.option("--stm", type=click.Path(dir_okay=False), default=None,
              help="Reference stm (e.g. eval2000's): score the CTM as hubscr.pl does, printing "
                   "Kaldi's '%WER x | #snt #wrd | corr sub del ins err s.err | sys' lines for "
                   "the set and its sw_/en_ subsets.")
@click.option("--glm", type=click.Path(dir_okay=False), default=None,
              help="The GLM word mappings applied to stm and ctm (with --stm).")
@click.option("--data", "data_dir", type=click.Path(file_okay=False), default=None,
              help="With --stm and a decode dir instead of a CTM: the test data dir whose "
                   "segments and reco2file_and_channel make each ctm recording-relative "
                   "(score_sclite.sh); every sweep point is scored and the best one shown.")
@click.option("--recipe", type=click.Choice(RECIPES), default=S5C, show_default=True,
              help="With --data: whose local/score_sclite.sh stage 1 makes the ctm: s5c's "
                   "(hesitations and partial words dropped, acronyms mapped with --acronyms) "
                   "or fisher_swbd's (every dotted word split at '._', no map).")
@click.option("--acronyms", default=None, metavar="FILE|none",
              help="With --data and --recipe s5c: the acronyms.map of s5c's dict "
                   "(map_acronyms_ctm.py: u._c._l._a. -> u c l a). Default: "
                   "DATA/../local/dict_nosp/acronyms.map when it exists; 'none': no mapping.")
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
def main(paths: tuple[str, ...], stm: str | None, glm: str | None, data_dir: str | None,
         recipe: str, acronyms: str | None, subsets_by: str | None,
         words_txt: str | None, out_dir: str | None, report: str | None,
         name: str | None) -> None:
    """Score HYP (a Kaldi text file, or a decode dir with text and/or score_*/text variants)
    against REF_TEXT. Missing hypotheses count as deletions; sweeps pick the best variant as
    utils/best_wer.sh does. With --stm and --glm, score one CTM (times relative to the
    recording) as hubscr.pl -h hub5 does; CTM.filt.sys files hold the Sum/Avg rows."""
    if stm is not None or glm is not None:
        if stm is None or glm is None or len(paths) != 1:
            raise AsrdistError("the stm mode takes --stm STM --glm GLM and one CTM argument")
        if data_dir is not None:
            lines = score_decode_dir(stm, glm, paths[0], data_dir, recipe=recipe,
                                     acronyms=_acronym_map(acronyms, recipe, data_dir))
        elif Path(paths[0]).is_dir():
            raise AsrdistError(f"{paths[0]} is a decode dir: give --data (its test data dir)")
        elif acronyms is not None or recipe != S5C:
            raise AsrdistError("--acronyms and --recipe make the ctm of a decode dir (with "
                               "--data); a CTM given alone is scored as it is")
        else:
            lines = score_stm_glm_ctm(stm, glm, paths[0])
        for line in lines:
            click.echo(line)
        return
    if len(paths) != 2:
        raise AsrdistError("expected REF_TEXT HYP (or --stm STM --glm GLM CTM)")
    ref_text, hyp = paths
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
