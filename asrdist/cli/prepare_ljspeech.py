"""asrdist-prepare-ljspeech: stage 0 of recipes/ljspeech, LJSpeech-1.1 as data dirs and LMs."""

from __future__ import annotations

import click

from asrdist.cli import command
from asrdist.corpus.ljspeech import LJSpeechOptions, download, prepare_ljspeech, read_summary
from asrdist.errors import AsrdistError
from asrdist.stage import Skipped

DIR = click.Path(file_okay=False)


@command()
@click.option("--corpus", default=None, type=DIR,
              help="LJSpeech-1.1 in the publisher's layout (metadata.csv, wavs/), whole or a "
                   "part of it: only clips with a wav are used.")
@click.option("--download", "download_dir", default=None, type=DIR,
              help="Download the corpus into this dir with lhotse's recipe and use it.")
@click.option("--test-corpus", "test_corpora", multiple=True, type=DIR,
              help="Another corpus in the same layout: all its clips are a test set named "
                   "after the dir, kept out of the LM (repeat the option).")
@click.option("--out", required=True, type=DIR,
              help="The recipe's data dir (train/, test/, manifests/, local/, lang/).")
def main(corpus: str | None, download_dir: str | None, test_corpora: tuple[str, ...],
         out: str) -> None:
    """Write data dirs (16 kHz sox pipes in wav.scp, chapters as speakers), lhotse manifests,
    a CMUdict + espeak-ng lexicon and lang dir, the LM text and its 3- and 4-gram ARPA LMs,
    and print each set's size, OOV rate and perplexity. A rerun with the same corpora is
    skipped."""
    if (corpus is None) == (download_dir is None):
        raise AsrdistError("give --corpus DIR or --download DIR (one of them)")
    corpus_path = str(download(download_dir)) if download_dir is not None else str(corpus)
    summary = prepare_ljspeech(out, LJSpeechOptions(corpus_path, test_corpora))
    if isinstance(summary, Skipped):  # done already: asrdist.stage logged the skip line
        summary = read_summary(out)
    for line in summary.lines():
        click.echo(line)


if __name__ == "__main__":
    main()
