"""Scoring library: missing hypotheses, bad input, subsets and best_wer.sh's choice."""

from __future__ import annotations

from pathlib import Path

import pytest

from asrdist.errors import AsrdistError
from asrdist.score.align_text import ErrorCounts
from asrdist.score.score import (
    best_variant,
    kaldi_wer_report,
    read_text,
    score_hypotheses,
    score_texts,
    wer_line,
)

REFS = {"s1-a": "the cat sat".split(), "s1-b": "on the mat".split(), "s2-c": "a dog".split()}


def test_wer_line_is_kaldi_format():
    c = ErrorCounts(ref_words=10000, corr=8766, sub=934, dels=200, ins=100)
    assert wer_line(c) == "%WER 12.34 [ 1234 / 10000, 100 ins, 200 del, 934 sub ]"


def test_missing_hypothesis_counts_as_deletions_and_is_reported():
    result = score_texts(REFS, {"s1-a": "the cat sat".split(), "s2-c": []})
    assert result.missing == ["s1-b"]
    assert (result.total.dels, result.total.errors, result.total.ref_words) == (5, 5, 8)
    assert "Scored 3 sentences, 1 not present in hyp." in kaldi_wer_report(result)


def test_subsets_sum_to_total():
    subset_of = {"s1-a": ("s1",), "s1-b": ("s1",), "s2-c": ("s2",)}
    result = score_texts(REFS, {"s1-a": "the cat".split(), "s2-c": "a cat".split()}, subset_of)
    assert result.subsets["s1"].dels == 4 and result.subsets["s2"].sub == 1
    assert result.subsets["s1"] + result.subsets["s2"] == result.total


def _scored_dir(tmp_path, utt2synth: str, hyps: str) -> tuple[Path, Path]:
    """data/test (REFS, utt2spk, ``utt2synth``) and a hypothesis text ``hyps``."""
    ref = tmp_path / "test" / "text"
    ref.parent.mkdir()
    ref.write_text("".join(f"{u} {' '.join(w)}\n" for u, w in REFS.items()))
    (ref.parent / "utt2spk").write_text("s1-a s1\ns1-b s1\ns2-c s2\n")
    (ref.parent / "utt2synth").write_text(utt2synth)
    hyp = tmp_path / "hyp"
    hyp.write_text(hyps)
    return ref, hyp


def test_speaker_and_synthesizer_subsets_at_once(tmp_path):
    ref, hyp = _scored_dir(tmp_path, "s1-a espeak\ns1-b espeak\ns2-c flite\n",
                           "s1-a the cat\ns2-c a cat\n")
    run = score_hypotheses(ref, hyp, subsets_by=f"spk,{ref.parent / 'utt2synth'}")
    subsets = run.main.result.subsets
    assert list(subsets) == ["espeak", "flite", "s1", "s2"]
    assert subsets["espeak"] == subsets["s1"] and subsets["flite"] == subsets["s2"]
    assert subsets["espeak"] + subsets["flite"] == run.main.result.total


def test_an_utterance_missing_from_one_subset_file_is_named(tmp_path):
    ref, hyp = _scored_dir(tmp_path, "s1-a espeak\ns2-c flite\n", "s1-a the cat\n")
    with pytest.raises(AsrdistError, match=r"utt2synth has no subset for 1 reference "
                                           r"utterance\(s\), e.g. s1-b"):
        score_hypotheses(ref, hyp, subsets_by=f"spk,{ref.parent / 'utt2synth'}")


def test_empty_test_set_is_refused():
    with pytest.raises(AsrdistError, match="empty test set"):
        score_texts({}, {})


def test_hypothesis_for_unknown_utterance_is_refused():
    with pytest.raises(AsrdistError, match="not in the reference"):
        score_texts(REFS, {"zz": ["x"]})


def test_duplicate_utterance_is_refused(tmp_path):
    (tmp_path / "text").write_text("u1 a\nu1 b\n")
    with pytest.raises(AsrdistError, match="duplicate key u1"):
        read_text(tmp_path / "text")


def test_word_not_in_words_txt_is_refused(tmp_path):
    (tmp_path / "ref").write_text("u1 a b\n")
    (tmp_path / "hyp").write_text("u1 a zebra\n")
    (tmp_path / "words.txt").write_text("<eps> 0\na 1\nb 2\n")
    with pytest.raises(AsrdistError, match="u1: hypothesis word 'zebra' is not in words.txt"):
        score_hypotheses(tmp_path / "ref", tmp_path / "hyp", words_txt=tmp_path / "words.txt")


def test_best_variant_follows_best_wer_sh():
    worse = ErrorCounts(ref_words=10, sub=3)
    better = ErrorCounts(ref_words=10, sub=2)
    assert best_variant({"8_0.0": worse, "12_0.0": better, "9_0.5": worse}) == "12_0.0"
    # Equal %WER: the first in C-locale order of wer_* file names wins, as with a shell glob.
    assert best_variant({"8_0.0": better, "10_0.0": better}) == "10_0.0"


def test_decode_dir_sweep_writes_kaldi_files(tmp_path):
    (tmp_path / "ref").write_text("u1 a b c\nu2 d e\n")
    dec = tmp_path / "decode"
    for name, hyp in {"10_0.0": "u1 a b c\nu2 d\n", "12_0.0": "u1 a b c\nu2 d e\n"}.items():
        (dec / f"score_{name}").mkdir(parents=True)
        (dec / f"score_{name}" / "text").write_text(hyp)
    run = score_hypotheses(tmp_path / "ref", dec)
    assert run.main is None and run.best.name == "12_0.0"
    assert (dec / "best_wer").read_text().startswith("%WER 0.00 [ 0 / 5, 0 ins, 0 del, 0 sub ]")
    assert (dec / "wer_10_0.0").read_text().startswith("%WER 20.00 [ 1 / 5, 0 ins, 1 del, 0 sub ]")
    assert (dec / "hyp.trn").read_text() == "a b c (u1-u1)\nd e (u2-u2)\n"
