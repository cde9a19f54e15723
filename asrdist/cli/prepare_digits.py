"""asrdist-prepare-digits: stage 0 of recipes/digits, the Free Spoken Digit Dataset as data dirs."""

from __future__ import annotations

import click

from asrdist.cli import command
from asrdist.corpus.fsdd import DEFAULT_TEST_SPEAKERS, prepare_digits, read_summary
from asrdist.stage import Skipped


@command()
@click.option("--corpus", required=True, type=click.Path(file_okay=False),
              help="FSDD as its publisher ships it: DIR/recordings/{digit}_{speaker}_{index}.wav.")
@click.option("--out", required=True, type=click.Path(file_okay=False),
              help="The recipe's data dir (train/, test/, manifests/, local/, lang/).")
@click.option("--test-speakers", default=",".join(DEFAULT_TEST_SPEAKERS), show_default=True,
              help="Comma-separated speakers held out of training into test/; 'none': "
                   "every speaker trains and only the --test-corpus sets test.")
@click.option("--test-corpus", "test_corpora", multiple=True, type=click.Path(file_okay=False),
              help="Another corpus in the same layout (repeatable): all its clips become "
                   "the test data dir named after its directory.")
def main(corpus: str, out: str, test_speakers: str, test_corpora: tuple[str, ...]) -> None:
    """Write Kaldi data dirs (wav.scp, text, utt2spk, spk2utt), lhotse manifests, the
    ten-digit CMUdict lexicon (local/dict), the lang dir, the one-digit grammar
    (local/grammar.txt) and the corpus's sample rate (local/sample_rate). A rerun with the
    same options and recordings is skipped."""
    speakers = () if test_speakers == "none" else tuple(s for s in test_speakers.split(",") if s)
    summary = prepare_digits(corpus, out, speakers, test_corpora)
    if isinstance(summary, Skipped):  # done already: asrdist.stage logged the skip line
        summary = read_summary(out)
    for part in summary:
        click.echo(part.line())


if __name__ == "__main__":
    main()
