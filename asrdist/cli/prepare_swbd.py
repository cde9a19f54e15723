"""asrdist-prepare-swbd: stage 0 of recipes/swbd300 and swbd2000, LDC releases as data dirs."""

from __future__ import annotations

import click

from asrdist.cli import command
from asrdist.corpus.swbd_prepare import SwbdOptions, prepare_swbd

DIR = click.Path(file_okay=False)


@command()
@click.option("--swbd-audio", required=True, type=DIR,
              help="LDC97S62 (Switchboard-1 Release 2): the sw0NNNN.sph files under it.")
@click.option("--ms98", required=True, type=DIR,
              help="swb_ms98_transcriptions (ISIP MS98 word transcripts, sw-ms98-dict.text).")
@click.option("--eval2000-audio", required=True, type=DIR,
              help="LDC2002S09 (hub5e_00/english/*.sph, hub5e_00.pem).")
@click.option("--eval2000-ref", required=True, type=DIR,
              help="LDC2002T43 (reference/hub5e00.english.000405.stm, en20000405_hub5.glm).")
@click.option("--fisher-audio", multiple=True, type=DIR,
              help="Fisher audio: LDC2004S13, LDC2005S13 (repeat the option).")
@click.option("--fisher-text", multiple=True, type=DIR,
              help="Fisher transcripts: LDC2004T19, LDC2005T19 (repeat the option).")
@click.option("--dev-utts", default=4000, show_default=True, type=int,
              help="train_dev: the first N utterances of Switchboard (s5c's 4000; not "
                   "used with Fisher: fisher_swbd has no train_dev).")
@click.option("--max-dup", default=300, show_default=True, type=int,
              help="train_nodup: about N utterances per transcript, drawn as remove_dup_utts.sh.")
@click.option("--speed-perturb", default="", show_default=True,
              help="Speed factors for a _sp copy of the training set, e.g. '0.9 1.0 1.1'.")
@click.option("--always-include-prefix/--no-always-include-prefix", default=None,
              help="Prefix the speed-1.0 copy's utterances and speakers with sp1.0- (Kaldi's "
                   "perturb_data_dir_speed_3way.sh option). Default: as the recipe the "
                   "alignments come from: yes without Fisher (s5c), no with it (fisher_swbd).")
@click.option("--extend-eval2000/--no-extend-eval2000", default=None,
              help="Extend eval2000's segments by up to 0.1 s (s5c's extend_segments.pl). "
                   "Default: yes without Fisher (s5c), no with it (fisher_swbd).")
@click.option("--allow-partial", is_flag=True,
              help="Go on when a release is not the size Kaldi's scripts check (2435 or 2438 "
                   "Switchboard sph files, 11699 Fisher transcripts and sph files, 80 eval2000 "
                   "sides): a partial corpus otherwise stops with the counts.")
@click.option("--out", required=True, type=DIR, help="The recipe's data dir.")
def main(swbd_audio: str, ms98: str, eval2000_audio: str, eval2000_ref: str,
         fisher_audio: tuple[str, ...], fisher_text: tuple[str, ...], dev_utts: int,
         max_dup: int, speed_perturb: str, always_include_prefix: bool | None,
         extend_eval2000: bool | None, allow_partial: bool, out: str) -> None:
    """Kaldi data dirs with Kaldi's ids for Switchboard-1, eval2000 and optionally Fisher, as
    the Kaldi recipe makes them: without Fisher egs/swbd/s5c's train, train_dev, train_nodup;
    with Fisher egs/fisher_swbd/s5's train_swbd, train (Fisher + Switchboard), train_nodup;
    then [train_nodup_sp] and eval2000 (with stm and glm). Prints the training set's name
    last."""
    try:
        factors = tuple(float(f) for f in speed_perturb.split())
    except ValueError:
        raise click.BadParameter(f"not a list of numbers: {speed_perturb!r}",
                                 param_hint="--speed-perturb") from None
    options = SwbdOptions(swbd_audio, ms98, eval2000_audio, eval2000_ref, fisher_audio,
                          fisher_text, dev_utts, max_dup, factors, always_include_prefix,
                          extend_eval2000, allow_partial)
    prepare_swbd(out, options)
    click.echo(options.train_set)


if __name__ == "__main__":
    main()
