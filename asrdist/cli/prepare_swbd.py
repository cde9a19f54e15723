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
              help="train_dev: the first N utterances of Switchboard (Kaldi's 4000).")
@click.option("--max-dup", default=300, show_default=True, type=int,
              help="train_nodup: about N utterances per transcript, drawn as remove_dup_utts.sh.")
@click.option("--speed-perturb", default="", show_default=True,
              help="Speed factors for a _sp copy of the training set, e.g. '0.9 1.0 1.1'.")
@click.option("--out", required=True, type=DIR, help="The recipe's data dir.")
def main(swbd_audio: str, ms98: str, eval2000_audio: str, eval2000_ref: str,
         fisher_audio: tuple[str, ...], fisher_text: tuple[str, ...], dev_utts: int,
         max_dup: int, speed_perturb: str, out: str) -> None:
    """Kaldi data dirs with Kaldi's ids (sw02001-A_000098-001156) for Switchboard-1, eval2000
    and optionally Fisher: train, train_dev, train_nodup, [fisher, train_swbd_fisher],
    [<train set>_sp], eval2000 (with stm and glm). Prints the training set's name last."""
    try:
        factors = tuple(float(f) for f in speed_perturb.split())
    except ValueError:
        raise click.BadParameter(f"not a list of numbers: {speed_perturb!r}",
                                 param_hint="--speed-perturb") from None
    options = SwbdOptions(swbd_audio, ms98, eval2000_audio, eval2000_ref, fisher_audio,
                          fisher_text, dev_utts, max_dup, factors)
    prepare_swbd(out, options)
    click.echo(options.train_set)
