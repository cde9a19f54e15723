"""The Free Spoken Digit Dataset (FSDD) as a Kaldi recipe's data/: recordings in the publisher's
layout, ``DIR/recordings/{digit}_{speaker}_{index}.wav``, become lhotse manifests, Kaldi data
dirs, a ten-word dict dir, the lang dir and a one-digit grammar.

The test set holds out whole speakers (speaker-independent); the publisher's own test set
(indices 0-4 of every speaker) shares the training speakers. Further test corpora in the same
layout (speakers kept back by reviewers) each become a data dir named after their directory.
With no speaker held out (``--test-speakers none``) all train and only those corpora test.
The sample rate is read from the audio: every file must have the corpus's one rate, and it is
written to ``local/sample_rate`` so that feature extraction follows it instead of resampling.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import soundfile
from lhotse import AudioSource, Recording, RecordingSet, SupervisionSegment, SupervisionSet

from asrdist.corpus.lexicon import OOV_WORD, Lexicon, write_dict_dir
from asrdist.errors import AsrdistError
from asrdist.fsutil import atomic_write, staged_dir
from asrdist.kaldi.data_dir import Utterance, c_sorted, write_data_dir
from asrdist.stage import Skipped, check_done

log = logging.getLogger(__name__)

STAGE = "prepare_digits"
FILE_NAME = re.compile(r"(?P<digit>[0-9])_(?P<speaker>[a-z]+)_(?P<index>[0-9]+)\.wav")
DIGIT_WORDS = ("ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE")
# CMUdict 0.7b's pronunciations of the ten words, stress marks removed (both of ZERO's).
LEXICON: Lexicon = {
    "ZERO": [("Z", "IH", "R", "OW"), ("Z", "IY", "R", "OW")],
    "ONE": [("W", "AH", "N")],
    "TWO": [("T", "UW")],
    "THREE": [("TH", "R", "IY")],
    "FOUR": [("F", "AO", "R")],
    "FIVE": [("F", "AY", "V")],
    "SIX": [("S", "IH", "K", "S")],
    "SEVEN": [("S", "EH", "V", "AH", "N")],
    "EIGHT": [("EY", "T")],
    "NINE": [("N", "AY", "N")],
}
DEFAULT_TEST_SPEAKERS = ("nicolas",)
# names a --test-corpus dir cannot take: the recipe's own parts of data/
RESERVED_PARTS = ("train", "test", "lang", "local", "manifests")


@dataclass(frozen=True)
class Clip:
    """One recording: the digit said, who said it, and its take number."""

    path: Path
    digit: int
    speaker: str
    index: int
    num_samples: int
    sample_rate: int

    @property
    def utt_id(self) -> str:
        """Speaker-prefixed, the take zero-padded so a speaker's ids sort by digit and take."""
        return f"{self.speaker}-{self.digit}-{self.index:03d}"

    def utterance(self) -> Utterance:
        return Utterance(self.utt_id, self.speaker, DIGIT_WORDS[self.digit], str(self.path))


def scan_corpus(corpus: str | os.PathLike) -> list[Clip]:
    """Every clip of ``corpus/recordings``; a missing dir, a file not named as the publisher
    names them, a non-mono file or one whose rate differs from the others is one error."""
    recordings = Path(corpus) / "recordings"
    if not recordings.is_dir():
        raise AsrdistError(f"{corpus}: not an FSDD corpus (no recordings/ directory)")
    clips = []
    for name in c_sorted(n for n in os.listdir(recordings) if not n.startswith(".")):
        match = FILE_NAME.fullmatch(name)
        if match is None:
            raise AsrdistError(f"{recordings / name}: not an FSDD file name "
                               "({digit}_{speaker}_{index}.wav)")
        path = (recordings / name).absolute()
        try:
            info = soundfile.info(str(path))
        except (RuntimeError, soundfile.LibsndfileError) as e:
            raise AsrdistError(f"{path}: not a readable audio file ({e})") from None
        if info.channels != 1:
            raise AsrdistError(f"{path}: {info.channels} channels, expected mono")
        clips.append(Clip(path, int(match["digit"]), match["speaker"], int(match["index"]),
                          info.frames, info.samplerate))
    if not clips:
        raise AsrdistError(f"{recordings}: no recordings")
    return clips


def corpus_rate(clips: list[Clip]) -> int:
    """The one sample rate of ``clips``; a file at another rate is named, not resampled."""
    rates = Counter(c.sample_rate for c in clips)
    rate = rates.most_common(1)[0][0]
    for clip in clips:
        if clip.sample_rate != rate:
            raise AsrdistError(f"{clip.path}: {clip.sample_rate} Hz, the other recordings "
                               f"have {rate} Hz")
    return rate


def split_by_speaker(clips: list[Clip],
                     test_speakers: tuple[str, ...]) -> dict[str, list[Clip]]:
    """train: every speaker but ``test_speakers``; test: theirs (no test part when none are
    held out: every speaker trains, for evaluation on --test-corpus sets)."""
    speakers = {c.speaker for c in clips}
    for speaker in test_speakers:
        if speaker not in speakers:
            raise AsrdistError(f"--test-speakers: no recordings of {speaker!r} (the corpus has "
                               f"{', '.join(c_sorted(speakers))})")
    if speakers <= set(test_speakers):
        raise AsrdistError("--test-speakers leaves no speaker to train on")
    parts = {"train": [c for c in clips if c.speaker not in test_speakers]}
    if test_speakers:
        parts["test"] = [c for c in clips if c.speaker in test_speakers]
    return parts


def test_corpus_parts(test_corpora: tuple[str, ...]) -> dict[str, Path]:
    """Data dir name (the directory's basename) -> corpus dir, for each --test-corpus."""
    parts: dict[str, Path] = {}
    for given in test_corpora:
        name = Path(os.path.abspath(given)).name
        if name in RESERVED_PARTS:
            raise AsrdistError(f"--test-corpus {given}: its name {name!r} is one of the "
                               f"recipe's own data dirs ({', '.join(RESERVED_PARTS)})")
        if name in parts:
            raise AsrdistError(f"--test-corpus {given}: another test corpus is named {name!r}")
        parts[name] = Path(given)
    return parts


def grammar_text() -> str:
    """OpenFst text of the grammar: start -> one digit -> final, every digit equally likely
    (cost ln 10, so the LM weight shifts every path alike and only acoustics decide)."""
    cost = f"{math.log(len(DIGIT_WORDS)):.6f}"
    arcs = [f"0 1 {w} {w} {cost}\n" for w in DIGIT_WORDS]
    return "".join(arcs) + "1\n"


def _write_manifests(directory: Path, parts: dict[str, list[Clip]]) -> None:
    """lhotse RecordingSet / SupervisionSet per data dir, as the other corpora write them."""
    with staged_dir(directory) as tmp:
        for part, clips in parts.items():
            recordings = [Recording(
                id=c.utt_id, sources=[AudioSource(type="file", channels=[0], source=str(c.path))],
                sampling_rate=c.sample_rate, num_samples=c.num_samples,
                duration=c.num_samples / c.sample_rate) for c in clips]
            supervisions = [SupervisionSegment(
                id=c.utt_id, recording_id=c.utt_id, start=0.0,
                duration=c.num_samples / c.sample_rate, channel=0, text=DIGIT_WORDS[c.digit],
                speaker=c.speaker, language="English") for c in clips]
            RecordingSet.from_recordings(recordings).to_file(tmp / f"{part}_recordings.jsonl.gz")
            SupervisionSet.from_segments(supervisions).to_file(
                tmp / f"{part}_supervisions.jsonl.gz")


@dataclass(frozen=True)
class PartSummary:
    name: str
    utterances: int
    speakers: tuple[str, ...]
    seconds: float

    def line(self) -> str:
        return (f"{self.name}: {self.utterances} utterances, {self.seconds / 60:.1f} min, "
                f"speakers {' '.join(self.speakers)}")


def prepare_digits(corpus: str | os.PathLike, out: str | os.PathLike,
                   test_speakers: tuple[str, ...] = DEFAULT_TEST_SPEAKERS,
                   test_corpora: tuple[str, ...] = ()) -> list[PartSummary] | Skipped:
    """Write ``out``: train/, test/ and one dir per test corpus (Kaldi tables), manifests/,
    local/dict, lang/, local/grammar.txt and local/sample_rate. Skipped when done with the
    same options and the same recordings."""
    out = Path(out)
    extra = test_corpus_parts(test_corpora)
    if not test_speakers and not extra:
        raise AsrdistError("--test-speakers none holds no speaker out: give a --test-corpus")
    options = {"test_speakers": list(test_speakers),
               "test_corpora": {n: os.path.abspath(p) for n, p in extra.items()}}
    inputs = [Path(corpus) / "recordings", *(p / "recordings" for p in extra.values())]
    out.mkdir(parents=True, exist_ok=True)
    check = check_done(out, STAGE, options, inputs)
    if check.done:
        return check.skipped()
    clips = scan_corpus(corpus)
    parts = split_by_speaker(clips, test_speakers)
    train_speakers = {c.speaker for c in parts["train"]}
    for name, path in extra.items():
        parts[name] = scan_corpus(path)
        shared = train_speakers & {c.speaker for c in parts[name]}
        if shared:
            raise AsrdistError(f"--test-corpus {path}: speaker {c_sorted(shared)[0]} is also "
                               "a training speaker (the test must be speaker-independent)")
    rate = corpus_rate([c for part in parts.values() for c in part])
    if "test" not in parts and (out / "test").is_dir():  # an earlier split's, not this one's
        shutil.rmtree(out / "test")
    for name, part_clips in parts.items():
        write_data_dir(out / name, [c.utterance() for c in part_clips])
    _write_manifests(out / "manifests", parts)

    dict_dir = out / "local" / "dict"
    write_dict_dir(LEXICON, dict_dir)
    from asrdist.kaldi.lang import prepare_lang  # imports kaldifst: only when needed

    prepare_lang(dict_dir, out / "lang", oov_word=OOV_WORD)
    with atomic_write(out / "local" / "grammar.txt") as f:
        f.write(grammar_text())
    with atomic_write(out / "local" / "sample_rate") as f:
        f.write(f"{rate}\n")
    summary = [PartSummary(name, len(c), tuple(c_sorted({x.speaker for x in c})),
                           sum(x.num_samples for x in c) / rate) for name, c in parts.items()]
    with atomic_write(out / "local" / "corpus_summary.json") as f:
        json.dump([asdict(s) for s in summary], f, indent=1)
    check.mark_done()
    log.info("FSDD data ready in %s (%d Hz)", out, rate)
    return summary


def read_summary(out: str | os.PathLike) -> list[PartSummary]:
    """The summary a finished run stored in ``out/local/corpus_summary.json``."""
    raw = json.loads((Path(out) / "local" / "corpus_summary.json").read_text())
    return [PartSummary(r["name"], r["utterances"], tuple(r["speakers"]), r["seconds"])
            for r in raw]
