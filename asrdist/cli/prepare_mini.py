"""asrdist-prepare-mini: stage 0 of recipes/mini, the espeak-ng + flite corpus as data dirs."""

from __future__ import annotations

import click

from asrdist.cli import command
from asrdist.corpus.mini_corpus import CorpusOptions, prepare_mini, read_summary
from asrdist.corpus.voices import SYNTHESIZERS
from asrdist.stage import Skipped


@command()
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="The recipe's data dir (train/, test/, wav/, manifests/, local/dict, lang/).")
@click.option("--hours", default=3.0, show_default=True, type=float,
              help="Hours of training audio.")
@click.option("--test-hours", default=None, type=float,
              help="Hours of test audio [default: 20 minutes].")
@click.option("--test-utts", default=None, type=int,
              help="Number of test utterances (instead of --test-hours).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--sample-rate", default=16000, show_default=True, type=int)
@click.option("--synthesizers", default=",".join(SYNTHESIZERS), show_default=True,
              help="Comma-separated synthesizers; each speaks an equal share of every split.")
def main(out: str, hours: float, test_hours: float | None, test_utts: int | None, seed: int,
         sample_rate: int, synthesizers: str) -> None:
    """Speak grammar sentences with espeak-ng and flite voices (each synthesizer's voices split
    between train and test; disjoint sentences), add padding and noise, and write Kaldi data
    dirs (with utt2synth), lhotse manifests, an espeak lexicon (local/dict) and the lang dir.
    Rerun with the same options, a finished OUT is skipped; with other options it is made
    again (wavs kept when only --hours changed)."""
    options = CorpusOptions(hours=hours, test_hours=test_hours, test_utts=test_utts, seed=seed,
                            sample_rate=sample_rate,
                            synthesizers=tuple(s for s in synthesizers.split(",") if s))
    summary = prepare_mini(out, options)
    if isinstance(summary, Skipped):  # done already: asrdist.stage logged the skip line
        summary = read_summary(out)
    for line in summary.lines():
        click.echo(line)


if __name__ == "__main__":
    main()
