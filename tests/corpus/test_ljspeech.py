"""LJSpeech data prep: text normalisation, the split, the CMUdict/espeak lexicon, data dirs
made from a few real clips (symlinked into a publisher-layout dir) with one-line errors, and
the prepare CLI's LM step on them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import soundfile

from asrdist.cli.prepare_ljspeech import estimate_lms
from asrdist.corpus.ljspeech import LJSpeechOptions, prepare_ljspeech, split_of
from asrdist.corpus.ljspeech_lexicon import (
    ESPEAK_TO_ARPABET,
    build_arpabet_lexicon,
    espeak_arpabet,
)
from asrdist.corpus.ljspeech_text import normalize_text, read_metadata
from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import read_table
from asrdist.stage import Skipped
from tests.real_corpora import real_corpus

ARPABET = set("AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY P R S SH "
              "T TH UH UW V W Y Z ZH".split())


@pytest.mark.parametrize("normalized, words", [
    ("Printing, in the only sense with which we are at present concerned,",
     "PRINTING IN THE ONLY SENSE WITH WHICH WE ARE AT PRESENT CONCERNED"),
    ("fourteen sixty-nine, fourteen seventy;", "FOURTEEN SIXTY NINE FOURTEEN SEVENTY"),
    ("the printer's 'black letter' type", "THE PRINTER'S BLACK LETTER TYPE"),
    ('Müller -- of [the] "Times."', "MULLER OF THE TIMES"),
    ("Don't (he asked) go!?", "DON'T HE ASKED GO"),
])
def test_normalize_text(normalized: str, words: str) -> None:
    assert normalize_text(normalized) == words


def test_read_metadata_uses_the_normalized_column(tmp_path: Path) -> None:
    (tmp_path / "metadata.csv").write_text("LJ001-0045|1469, 1470;|fourteen sixty-nine, "
                                           "fourteen seventy;\n")
    clip = read_metadata(tmp_path / "metadata.csv")["LJ001-0045"]
    assert (clip.words, clip.chapter) == ("FOURTEEN SIXTY NINE FOURTEEN SEVENTY", "LJ001")


@pytest.mark.parametrize("line, message", [
    ("LJ001-0001|only two fields", "metadata.csv:1: expected ID|transcription"),
    ("LJ1-1|a|a", "clip id 'LJ1-1' is not like LJ001-0001"),
    ("LJ001-0001|...|...", "clip LJ001-0001 has no words"),
])
def test_read_metadata_refuses_bad_lines(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "metadata.csv").write_text(line + "\n")
    with pytest.raises(AsrdistError, match=message):
        read_metadata(tmp_path / "metadata.csv")


def test_read_metadata_refuses_a_duplicate(tmp_path: Path) -> None:
    (tmp_path / "metadata.csv").write_text("LJ001-0001|a|a\nLJ001-0001|b|b\n")
    with pytest.raises(AsrdistError, match="metadata.csv:2: clip LJ001-0001 listed twice"):
        read_metadata(tmp_path / "metadata.csv")


@pytest.mark.parametrize("clip, split", [
    ("LJ002-0001", "test"), ("LJ002-0100", "test"), ("LJ002-0101", "kept_back"),
    ("LJ002-0200", "kept_back"), ("LJ002-0201", "train"), ("LJ001-0100", "train"),
    ("LJ003-0050", "train"), ("LJ050-0001", "train"),
])
def test_split_of(clip: str, split: str) -> None:
    assert split_of(clip) == split


def test_cmudict_pronunciations_lose_their_stress() -> None:
    # CMUdict 0.7b: ABOUT AH0 B AW1 T; THE DH AH0 / DH AH1 / DH IY0; PRINTING two variants
    lexicon, guessed = build_arpabet_lexicon(["ABOUT", "THE", "PRINTING"])
    assert lexicon["ABOUT"] == [("AH", "B", "AW", "T")]
    assert lexicon["THE"] == [("DH", "AH"), ("DH", "IY")]
    assert lexicon["PRINTING"] == [("P", "R", "IH", "N", "T", "IH", "NG"),
                                   ("P", "R", "IH", "N", "IH", "NG")]
    assert guessed == []


@pytest.mark.parametrize("word, phones", [
    ("ZIB", "Z IH B"), ("FLAMP", "F L AE M P"), ("SNORP", "S N AO R P"), ("MIPE", "M AY P"),
    ("SHUBBLE", "SH AH B AH L"), ("PLARTER", "P L AA R T ER"),
])
def test_words_cmudict_lacks_get_espeak_arpabet(word: str, phones: str) -> None:
    lexicon, guessed = build_arpabet_lexicon([word])
    assert guessed == [word]
    assert lexicon[word] == [tuple(phones.split())]


def test_espeak_map_gives_only_arpabet() -> None:
    assert {p for phones in ESPEAK_TO_ARPABET.values() for p in phones} <= ARPABET


def test_espeak_arpabet_names_an_unmapped_phoneme(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(ESPEAK_TO_ARPABET, "z")
    with pytest.raises(AsrdistError, match="word 'ZIB': espeak-ng phoneme 'z' has no ARPAbet"):
        espeak_arpabet("ZIB")


# --- data prep on real clips ----------------------------------------------------------------

TRAIN = [f"LJ001-{i:04d}" for i in range(1, 7)]
TEST = [f"LJ002-{i:04d}" for i in range(1, 4)]
TEXT_ONLY = [f"LJ001-{i:04d}" for i in range(20, 40)]
EXTRA = [f"LJ001-{i:04d}" for i in range(180, 182)]  # stands in for the kept-back clips


def _publisher_dir(root: Path, source: Path, with_audio: list[str], text_only: list[str],
                   extra_lines: tuple[str, ...] = ()) -> Path:
    """metadata.csv lines of the real corpus for the clips, wavs/ symlinks for some of them."""
    lines = {line.split("|")[0]: line for line in
             (source / "metadata.csv").read_text(encoding="utf-8").splitlines()}
    (root / "wavs").mkdir(parents=True)
    for clip in with_audio:
        (root / "wavs" / f"{clip}.wav").symlink_to(source / "wavs" / f"{clip}.wav")
    (root / "metadata.csv").write_text(
        "".join(lines[c] + "\n" for c in [*with_audio, *text_only]) +
        "".join(line + "\n" for line in extra_lines), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, object]:
    source = real_corpus("ljspeech-part") / "LJSpeech-1.1"
    root = tmp_path_factory.mktemp("lj")
    kept_back = "LJ002-0150|A kept back sentence.|A kept back sentence."
    corpus = _publisher_dir(root / "LJSpeech-1.1", source, TRAIN + TEST, TEXT_ONLY + EXTRA,
                            (kept_back,))
    extra = _publisher_dir(root / "heldout", source, EXTRA, [])
    out = root / "data"
    summary = prepare_ljspeech(out, LJSpeechOptions(str(corpus), (str(extra),)))
    return out, corpus, summary


def test_data_dirs_follow_the_split(prepared) -> None:
    out, _, summary = prepared
    assert list(read_table(out / "train" / "text")) == TRAIN
    assert list(read_table(out / "test" / "text")) == TEST
    assert list(read_table(out / "heldout" / "text")) == EXTRA
    assert set(read_table(out / "test" / "utt2spk").values()) == {"LJ002"}
    assert read_table(out / "train" / "spk2utt") == {"LJ001": " ".join(TRAIN)}
    assert read_table(out / "train" / "text")["LJ001-0002"] == "IN BEING COMPARATIVELY MODERN"
    assert [s.name for s in summary.sets] == ["train", "test", "heldout"]
    for name in ("train", "test", "heldout"):
        assert (out / "manifests" / f"{name}_recordings.jsonl.gz").is_file()


def test_lm_text_leaves_out_every_test_and_kept_back_clip(prepared) -> None:
    out, _, summary = prepared
    lm = read_table(out / "local" / "lm" / "text")
    assert list(lm) == TRAIN + TEXT_ONLY
    assert summary.lm_sentences == len(TRAIN + TEXT_ONLY)
    words = set(" ".join(lm.values()).split())
    assert "KEPT" not in words
    lexicon = {line.split()[0] for line in (out / "local" / "dict" / "lexicon.txt").open()}
    assert words <= lexicon
    test_words = " ".join(read_table(out / "test" / "text").values()).split()
    test = summary.sets[1]
    assert (test.words, test.oov_words) == (len(test_words),
                                            sum(w not in words for w in test_words))
    assert test.oov_words > 0


def test_lms_on_the_lm_text_report_each_test_sets_perplexity(prepared, caplog) -> None:
    out, _, _ = prepared
    report = estimate_lms(out, ["test", "heldout"])
    assert set(report.ppl) == {"test", "heldout"}
    for ppl in report.ppl.values():
        assert 1 < ppl["fg"] < 1e5 and 1 < ppl["tg"] < 1e5
    assert (out / "local" / "lm" / "lm_fg.arpa").read_text().count("\\4-grams:") == 1
    assert len(report.ngrams_fg) == 4 and report.ngrams_fg[0] > 30
    with caplog.at_level("INFO"):
        assert estimate_lms(out, ["test", "heldout"]) == report
    assert "ljspeech_lm already done" in caplog.text


def test_wav_scp_resamples_to_16k(prepared, tmp_path: Path) -> None:
    out, corpus, _ = prepared
    pipe = read_table(out / "test" / "wav.scp")["LJ002-0001"]
    assert pipe.startswith("sox ") and pipe.endswith(" |")
    wav = tmp_path / "16k.wav"
    subprocess.run(f"{pipe[:-1]} > {wav}", shell=True, check=True)
    native = soundfile.info(str(corpus / "wavs" / "LJ002-0001.wav"))
    resampled = soundfile.info(str(wav))
    assert (native.samplerate, resampled.samplerate, resampled.subtype) == (22050, 16000,
                                                                            "PCM_16")
    assert resampled.duration == pytest.approx(native.duration, abs=1e-3)


def test_rerun_is_skipped(prepared) -> None:
    out, corpus, _ = prepared
    extra = corpus.parent / "heldout"
    assert isinstance(prepare_ljspeech(out, LJSpeechOptions(str(corpus), (str(extra),))),
                      Skipped)


@pytest.mark.parametrize("missing", ["metadata.csv", "wavs"])
def test_a_dir_without_the_layout_is_one_error(tmp_path: Path, missing: str) -> None:
    corpus = tmp_path / "LJSpeech-1.1"
    (corpus / "wavs").mkdir(parents=True)
    (corpus / "metadata.csv").write_text("LJ001-0001|a|a\n")
    target = corpus / missing
    target.rmdir() if target.is_dir() else target.unlink()
    with pytest.raises(AsrdistError, match=f"--corpus {corpus}: no {missing}"):
        prepare_ljspeech(tmp_path / "data", LJSpeechOptions(str(corpus)))


def test_a_corpus_without_test_audio_is_one_error(tmp_path: Path) -> None:
    source = real_corpus("ljspeech-part") / "LJSpeech-1.1"
    corpus = _publisher_dir(tmp_path / "LJSpeech-1.1", source, TRAIN[:2], TEST)
    with pytest.raises(AsrdistError, match="no test clip has audio"):
        prepare_ljspeech(tmp_path / "data", LJSpeechOptions(str(corpus)))


def test_a_test_corpus_named_like_a_data_dir_is_refused(tmp_path: Path) -> None:
    source = real_corpus("ljspeech-part") / "LJSpeech-1.1"
    corpus = _publisher_dir(tmp_path / "LJSpeech-1.1", source, TRAIN[:2] + TEST[:1], [])
    extra = _publisher_dir(tmp_path / "train", source, EXTRA, [])
    with pytest.raises(AsrdistError, match="--test-corpus .*train.* would clash"):
        prepare_ljspeech(tmp_path / "data", LJSpeechOptions(str(corpus), (str(extra),)))
