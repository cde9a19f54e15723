"""asrdist-prepare-swbd: stage 0 of recipes/swbd300 and swbd2000, LDC releases as data dirs."""

from __future__ import annotations

from typing import Any

import click

from asrdist.cli import command
from asrdist.cli.options import derived_command, flags_of, made
from asrdist.corpus.swbd_prepare import SwbdOptions, prepare_swbd

DIR = click.Path(file_okay=False)


@command(cls=derived_command(lambda: flags_of(SwbdOptions)))
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
@click.option("--out", required=True, type=DIR, help="The recipe's data dir.")
def main(swbd_audio: str, ms98: str, eval2000_audio: str, eval2000_ref: str,
         fisher_audio: tuple[str, ...], fisher_text: tuple[str, ...], out: str,
         **values: Any) -> None:
    """Kaldi data dirs with Kaldi's ids for Switchboard-1, eval2000 and optionally Fisher, as
    the Kaldi recipe makes them: without Fisher egs/swbd/s5c's train, train_dev, train_nodup;
    with Fisher egs/fisher_swbd/s5's train_swbd, train (Fisher + Switchboard), train_nodup;
    then [train_nodup_sp] and eval2000 (with stm and glm). Prints the training set's name
    last."""
    options = made(SwbdOptions, values, swbd_audio=swbd_audio, ms98=ms98,
                   eval2000_audio=eval2000_audio, eval2000_ref=eval2000_ref,
                   fisher_audio=fisher_audio, fisher_text=fisher_text)
    prepare_swbd(out, options)
    click.echo(options.train_set)


if __name__ == "__main__":
    main()
