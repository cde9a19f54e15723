"""asrdist-prepare-ljspeech: stage 0 of recipes/ljspeech, LJSpeech-1.1 as data dirs and LMs.

Two steps, each skipped when done: the data prep (asrdist.corpus.ljspeech: data dirs, lexicon,
lang, LM text), then the LMs on that text with the estimator asrdist-mkgraph uses
(asrdist.decode.graph.estimate_lm, interpolated Kneser-Ney over the lang's words): the trigram
``lm_tg.arpa`` (what the graph's ``--text --order 3`` makes again) and the 4-gram ``lm_fg.arpa``
for rescoring, so the two differ only in their order. The corpus package sits below decode,
so the LM step is here.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import click

from asrdist.cli import command
from asrdist.corpus.ljspeech import LJSpeechOptions, download, prepare_ljspeech, read_summary
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.stage import Skipped, check_done

DIR = click.Path(file_okay=False)
LM_STAGE = "ljspeech_lm"
ORDERS = {"tg": 3, "fg": 4}  # the graph's trigram, the rescoring 4-gram


@dataclass(frozen=True)
class LMReport:
    """The 4-gram's size and each test set's perplexity (OOVs skipped) under both LMs."""

    ngrams_fg: list[int]  # 1-grams, 2-grams, ...
    ppl: dict[str, dict[str, float]]  # set -> {"tg": ..., "fg": ...}


def estimate_lms(data: Path, test_sets: list[str]) -> LMReport:
    """``data/local/lm/lm_{tg,fg}.arpa`` and ``lm_report.json``, skipped when done with the
    same lang words, LM text and test texts."""
    from asrdist.decode.graph import estimate_lm  # kaldifst: only when needed
    from asrdist.decode.lm import perplexity
    from asrdist.kaldi.data_dir import read_table
    from asrdist.kaldi.lang import Lang

    lm_dir = data / "local" / "lm"
    inputs = [data / "lang" / "words.txt", data / "lang" / "oov.txt", lm_dir / "text",
              *(data / s / "text" for s in test_sets)]
    check = check_done(lm_dir, LM_STAGE, {"orders": ORDERS}, inputs)
    if check.done:
        return LMReport(**json.loads((lm_dir / "lm_report.json").read_text()))
    lang = Lang.load(data / "lang")
    lms = {tag: estimate_lm(lang, lm_dir / "text", order, lm_dir / f"lm_{tag}.arpa")
           for tag, order in ORDERS.items()}
    ppl = {}
    for name in test_sets:
        sentences = [t.split() for t in read_table(data / name / "text").values()]
        ppl[name] = {tag: perplexity(lm, sentences).ppl for tag, lm in lms.items()}
    report = LMReport([len(p) for p in lms["fg"].prob[1:]], ppl)
    with atomic_write(lm_dir / "lm_report.json") as f:
        json.dump(dataclasses.asdict(report), f, indent=1)
    check.mark_done()
    return report


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
    report = estimate_lms(Path(out), [s.name for s in summary.sets if s.name != "train"])
    for line in summary.lines():
        click.echo(line)
    for name, ppl in report.ppl.items():
        click.echo(f"{name}: perplexity (OOVs skipped, </s> counted) tg {ppl['tg']:.1f} "
                   f"fg {ppl['fg']:.1f}")
    click.echo("4-gram: " + ", ".join(f"{n} {i + 1}-grams"
                                      for i, n in enumerate(report.ngrams_fg)))


if __name__ == "__main__":
    main()
