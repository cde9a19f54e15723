"""LJSpeech-1.1 (one reader, 13,100 clips, 22,050 Hz) as a Kaldi recipe's data/.

Input is a directory in the publisher's layout (``metadata.csv``, ``wavs/LJ001-0001.wav``): the
full corpus, or a part of it whose metadata.csv lists more clips than have audio (those are text
for the LM only). Manifests come from lhotse's own recipe (``lhotse.recipes.prepare_ljspeech``,
which skips clips without audio); the data dirs are written from them.

Split, by clip id, the same on the full corpus and on a part of it:

- test: LJ002-0001 .. LJ002-0100 (100 clips, about 11 minutes);
- kept back: LJ002-0101 .. LJ002-0200 never train and never enter the LM: the project's
  reviewers hold those recordings out to check the recipe on speech it never met
  (``--test-corpus``);
- train: every other clip with audio, but for those a ``--test-corpus`` lists.

"Speakers": LJSpeech has one reader, but its 50 chapters (LJ001 .. LJ050, the id's prefix) are
separate books recorded in separate sessions, so per-chapter CMVN normalises each session's
channel and level as per-speaker CMVN does for many speakers, and the test chapter's statistics
come from the test chapter itself.

Audio is read at 22,050 Hz as shipped and resampled to 16 kHz by sox in wav.scp
(``sox FILE -r 16000 -b 16 -t wav - |``, as Kaldi recipes resample), so features are the same
16 kHz MFCC/fbank as every other asrdist recipe's.

Text (asrdist.corpus.ljspeech_text) and lexicon (asrdist.corpus.ljspeech_lexicon): the LM
text is metadata.csv's normalised transcripts minus the test and kept-back clips, minus every
clip of a ``--test-corpus``, minus any other clip with a test sentence's words; the vocabulary is
that text's words. The LMs themselves are estimated on it by asrdist-prepare-ljspeech's second
step (with asrdist.decode's estimator, which data prep does not import: a lower layer).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from lhotse import RecordingSet, SupervisionSegment, SupervisionSet

from asrdist.corpus.lexicon import OOV_WORD, write_dict_dir
from asrdist.corpus.ljspeech_lexicon import build_arpabet_lexicon
from asrdist.corpus.ljspeech_text import Clip, read_metadata
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write
from asrdist.kaldi.data_dir import Utterance, c_sorted, write_data_dir
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "prepare_ljspeech"
SAMPLE_RATE = 16000
TEST_CHAPTER, TEST_CLIPS = "LJ002", range(1, 101)
KEPT_BACK_CLIPS = range(101, 201)  # of TEST_CHAPTER
RESERVED_NAMES = {"train", "test", "lang", "local", "manifests"}
SUMMARY_FORMAT = 2  # corpus_summary.json without the LMs' numbers: an older data dir is redone


def split_of(clip_id: str) -> str:
    """"test", "kept_back" or "train" for a clip id (see the module docstring)."""
    chapter, number = clip_id.split("-")
    if chapter == TEST_CHAPTER and int(number) in TEST_CLIPS:
        return "test"
    if chapter == TEST_CHAPTER and int(number) in KEPT_BACK_CLIPS:
        return "kept_back"
    return "train"


@dataclass(frozen=True)
class LJSpeechOptions:
    """What the data dirs depend on: the corpus and the extra test corpora (their paths)."""

    corpus: str
    test_corpora: tuple[str, ...] = ()


@dataclass(frozen=True)
class SetSummary:
    """One data dir: its size and how much of it the LM's vocabulary misses."""

    name: str
    utterances: int
    hours: float
    words: int
    oov_words: int

    def line(self) -> str:
        oov = f"OOV {self.oov_words}/{self.words} = {100 * self.oov_words / self.words:.2f} %"
        return (f"{self.name}: {self.utterances} clips, {self.hours:.3f} h, {self.words} words, "
                f"{oov}")


@dataclass(frozen=True)
class LJSpeechSummary:
    sets: list[SetSummary]
    lm_sentences: int
    lm_words: int
    vocabulary: int
    espeak_words: int  # vocabulary words CMUdict lacks, pronounced by espeak-ng

    def lines(self) -> list[str]:
        return [s.line() for s in self.sets] + [
            f"LM text: {self.lm_sentences} sentences, {self.lm_words} words; vocabulary "
            f"{self.vocabulary} words ({self.espeak_words} not in CMUdict: espeak-ng G2P)"]


def corpus_dir(path: str | os.PathLike, option: str) -> Path:
    """A publisher-layout dir, or one error naming the option and what is missing."""
    path = Path(path)
    if not path.is_dir():
        raise AsrdistError(f"{option} {path}: no such directory")
    for name in ("metadata.csv", "wavs"):
        if not (path / name).exists():
            raise AsrdistError(f"{option} {path}: no {name} (expected LJSpeech-1.1's layout: "
                               "metadata.csv and wavs/)")
    return path


@contextlib.contextmanager
def _quiet_missing_audio() -> Iterator[None]:
    """lhotse warns once per clip without audio: 12,715 lines for the shared part."""
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def read_corpus(path: Path, option: str) -> tuple[dict[str, Clip], RecordingSet]:
    """The clips of ``path``'s metadata.csv and the recordings of those with audio."""
    from lhotse.recipes import prepare_ljspeech as lhotse_prepare

    clips = read_metadata(path / "metadata.csv")  # our own checks first: one-line errors
    with _quiet_missing_audio():
        recordings = lhotse_prepare(path)["recordings"]
    if len(recordings) == 0:
        raise AsrdistError(f"{option} {path}: none of metadata.csv's clips has a wav in wavs/")
    for rec in recordings:
        if rec.sampling_rate < SAMPLE_RATE:
            raise AsrdistError(f"{option} {path}: clip {rec.id} has {rec.sampling_rate} Hz, "
                               f"below the {SAMPLE_RATE} Hz the features use")
    return clips, recordings


def sox_pipe(wav: str) -> str:
    """The wav.scp value that reads ``wav`` resampled to 16 kHz, 16-bit."""
    return f"sox {shlex.quote(wav)} -r {SAMPLE_RATE} -b 16 -t wav - |"


def _write_set(out: Path, name: str, ids: list[str], clips: dict[str, Clip],
               recordings: RecordingSet) -> None:
    """Data dir ``out/name`` and its lhotse manifests ``out/manifests/name_*.jsonl.gz``."""
    recs = [recordings[i] for i in ids]
    write_data_dir(out / name, [
        Utterance(r.id, clips[r.id].chapter, clips[r.id].words,
                  sox_pipe(str(Path(r.sources[0].source).resolve())))
        for r in recs])
    sups = [SupervisionSegment(id=r.id, recording_id=r.id, start=0.0, duration=r.duration,
                               channel=0, text=clips[r.id].words, language="English",
                               speaker=clips[r.id].chapter, gender="female") for r in recs]
    (out / "manifests").mkdir(parents=True, exist_ok=True)
    RecordingSet.from_recordings(recs).to_file(out / "manifests" / f"{name}_recordings.jsonl.gz")
    SupervisionSet.from_segments(sups).to_file(
        out / "manifests" / f"{name}_supervisions.jsonl.gz")


def test_set_name(path: str) -> str:
    """A --test-corpus's data dir name: its basename, refused where it would clash."""
    name = Path(path).resolve().name
    if name in RESERVED_NAMES or not name or name.startswith("."):
        raise AsrdistError(f"--test-corpus {path}: its name {name!r} would clash with the "
                           f"data dir's own {sorted(RESERVED_NAMES)}; rename or link it")
    return name


def _lm_texts(clips: dict[str, Clip], excluded_ids: set[str],
              test_texts: set[str]) -> dict[str, str]:
    return {c.clip_id: c.words for c in clips.values()
            if split_of(c.clip_id) == "train" and c.clip_id not in excluded_ids
            and c.words not in test_texts}


def write_lm_text(path: Path, texts: dict[str, str]) -> None:
    """The LM sentences as a Kaldi ``text`` (id words), what asrdist-mkgraph --text reads."""
    with atomic_write(path) as f:
        f.writelines(f"{clip} {texts[clip]}\n" for clip in c_sorted(texts))


def prepare_ljspeech(out: str | os.PathLike, options: LJSpeechOptions) -> LJSpeechSummary | Skipped:
    """data/{train,test,NAME...}, manifests/, local/dict, lang/, local/lm/text.

    Skipped when ``out`` is done with the same corpora (metadata.csv and wavs/ as inputs)."""
    out = Path(out)
    main_dir = corpus_dir(options.corpus, "--corpus")
    extra_dirs = [corpus_dir(p, "--test-corpus") for p in options.test_corpora]
    names = [test_set_name(p) for p in options.test_corpora]
    if len(set(names)) != len(names):
        raise AsrdistError(f"--test-corpus: two corpora with one name ({', '.join(names)})")
    inputs = [p for d in [main_dir, *extra_dirs] for p in (d / "metadata.csv", d / "wavs")]
    check = check_done(out, STAGE, {**dataclasses.asdict(options), "summary": SUMMARY_FORMAT},
                       inputs)
    if check.done:
        return check.skipped()

    clips, recordings = read_corpus(main_dir, "--corpus")
    extras = {name: read_corpus(path, "--test-corpus")
              for name, path in zip(names, extra_dirs, strict=True)}
    held_out = [c for c in clips.values() if split_of(c.clip_id) != "train"]
    held_out += [c for extra_clips, _ in extras.values() for c in extra_clips.values()]
    held_out_ids = {c.clip_id for c in held_out}  # a --test-corpus clip never trains either
    sets: dict[str, tuple[list[str], dict[str, Clip], RecordingSet]] = {}
    for split in ("train", "test"):
        ids = [r.id for r in recordings if split_of(r.id) == split
               and (split == "test" or r.id not in held_out_ids)]
        if not ids:
            raise AsrdistError(f"--corpus {main_dir}: no {split} clip has audio (test: "
                               f"{TEST_CHAPTER}-0001..0100, train: every other clip)")
        sets[split] = (ids, clips, recordings)
    for name, (extra_clips, extra_recs) in extras.items():
        sets[name] = ([r.id for r in extra_recs], extra_clips, extra_recs)

    lm_texts = _lm_texts(clips, held_out_ids, {c.words for c in held_out})
    vocab = {w for text in lm_texts.values() for w in text.split()}
    lexicon, guessed = build_arpabet_lexicon(vocab)
    write_dict_dir(lexicon, out / "local" / "dict")
    from asrdist.kaldi.lang import prepare_lang  # imports kaldifst: only when needed

    prepare_lang(out / "local" / "dict", out / "lang", oov_word=OOV_WORD)
    for name, (ids, set_clips, recs) in sets.items():
        _write_set(out, name, ids, set_clips, recs)

    write_lm_text(out / "local" / "lm" / "text", lm_texts)
    summaries = []
    for name, (ids, set_clips, recs) in sets.items():
        words = [w for i in ids for w in set_clips[i].words.split()]
        summaries.append(SetSummary(
            name, len(ids), sum(recs[i].duration for i in ids) / 3600, len(words),
            sum(w not in vocab for w in words)))
    summary = LJSpeechSummary(
        summaries, len(lm_texts), sum(len(t.split()) for t in lm_texts.values()), len(vocab),
        len(guessed))
    with atomic_write(out / "local" / "espeak_words.txt") as f:
        f.writelines(f"{w} {' '.join(lexicon[w][0])}\n" for w in guessed)
    with atomic_write(out / "local" / "corpus_summary.json") as f:
        json.dump(dataclasses.asdict(summary), f, indent=1)
    check.mark_done()
    log.info("LJSpeech data ready in %s", out)
    return summary


def read_summary(out: str | os.PathLike) -> LJSpeechSummary:
    """The summary a finished run stored in ``out/local/corpus_summary.json``."""
    raw = json.loads((Path(out) / "local" / "corpus_summary.json").read_text())
    return LJSpeechSummary(sets=[SetSummary(**s) for s in raw.pop("sets")], **raw)


def download(target_dir: str | os.PathLike) -> Path:
    """The full corpus from its publisher, by lhotse's recipe (skipped once complete)."""
    from lhotse.recipes import download_ljspeech

    return Path(download_ljspeech(target_dir))
