"""Alignments of augmented copies: kept, copied from the clean utterance, or realigned."""

from __future__ import annotations

import shutil
from pathlib import Path

import kaldi_hmm_gmm  # noqa: F401  (before anything that loads kaldifst)
import kaldiio
import numpy as np
import pytest

from asrdist.errors import AsrdistError
from asrdist.gmm.align_aug import align_augmented
from asrdist.gmm.train_mono import MonoOptions, train_mono
from asrdist.hmm.ali_dir import read_ali_dir
from asrdist.kaldi.data_dir import read_table
from asrdist.kaldi.transition_model import read_transition_model
from asrdist.stage import Skipped
from tests.gmm.synth_corpus import Corpus, make_corpus


@pytest.fixture(scope="module")
def system(tmp_path_factory) -> tuple[Corpus, Path]:
    root = tmp_path_factory.mktemp("aug")
    corpus = make_corpus(root, num_utts=12)
    exp = root / "mono"
    train_mono(corpus.data, corpus.lang, exp, MonoOptions(nj=1, num_iters=10, total_gauss=60))
    return corpus, exp


def _write_aug_dir(corpus: Corpus, out: Path, rev_frames_delta: int = 0) -> None:
    """Clean features, sp0.8- copies (frames repeated: slower) and rev1- copies (same frames
    plus a little noise), with cmvn stats per (prefixed) speaker and utt2uniq."""
    feats = {u: np.asarray(m) for u, m in kaldiio.load_scp(str(corpus.data / "feats.scp")).items()}
    text, utt2spk = read_table(corpus.data / "text"), read_table(corpus.data / "utt2spk")
    rng = np.random.default_rng(1)
    out_feats, out_text, out_spk, uniq = {}, {}, {}, {}
    for utt, m in feats.items():
        slow = m[np.floor(np.arange(int(m.shape[0] / 0.8)) * 0.8).astype(int)]
        rev = m + rng.normal(0, 0.05, m.shape)
        if rev_frames_delta:
            rev = rev[:rev_frames_delta]
        for prefix, mat in (("", m), ("sp0.8-", slow), ("rev1-", rev)):
            new = prefix + utt
            out_feats[new], out_text[new] = mat.astype(np.float32), text[utt]
            out_spk[new], uniq[new] = prefix + utt2spk[utt], utt
    out.mkdir(parents=True)
    utts = sorted(out_feats)
    kaldiio.save_ark(str(out / "feats.ark"), {u: out_feats[u] for u in utts},
                     scp=str(out / "feats.scp"))
    stats = {}
    for spk in sorted(set(out_spk.values())):
        m = np.concatenate([out_feats[u] for u in utts if out_spk[u] == spk]).astype(np.float64)
        st = np.zeros((2, m.shape[1] + 1))
        st[0, :-1], st[0, -1], st[1, :-1] = m.sum(0), m.shape[0], (m * m).sum(0)
        stats[spk] = st
    kaldiio.save_ark(str(out / "cmvn.ark"), stats, scp=str(out / "cmvn.scp"))
    for name, table in (("text", out_text), ("utt2spk", out_spk), ("utt2uniq", uniq)):
        (out / name).write_text("".join(f"{u} {table[u]}\n" for u in utts))
    (out / "utt2num_frames").write_text("".join(f"{u} {out_feats[u].shape[0]}\n" for u in utts))


def _phones(ali: np.ndarray, tid2phone: np.ndarray) -> list[int]:
    """The phone sequence of an alignment, repeats merged."""
    phones = tid2phone[ali]
    return [int(p) for i, p in enumerate(phones) if i == 0 or p != phones[i - 1]]


def test_copies_reuse_and_speed_copies_are_realigned(system, tmp_path):
    corpus, exp = system
    _write_aug_dir(corpus, tmp_path / "aug")
    summary = align_augmented(tmp_path / "aug", corpus.lang, exp, tmp_path / "ali", nj=2)
    assert summary is not None and summary.failed == []
    assert (summary.reused, summary.copied, summary.realigned) == (12, 12, 12)
    clean, aug = read_ali_dir(exp), read_ali_dir(tmp_path / "ali")
    frames = read_table(tmp_path / "aug" / "utt2num_frames")
    info = read_transition_model(exp / "final.mdl")
    tid2phone = info.tid_to_phone
    for utt, ali in clean.items():
        np.testing.assert_array_equal(aug[utt], ali)
        np.testing.assert_array_equal(aug["rev1-" + utt], ali)
        slow = aug["sp0.8-" + utt]
        assert slow.size == int(frames["sp0.8-" + utt]) > ali.size
        assert _phones(slow, tid2phone) == _phones(ali, tid2phone)  # same phones, new timing
    for name in ("final.mdl", "tree", "num_jobs", "ali.1.gz", "ali.2.gz"):
        assert (tmp_path / "ali" / name).is_file()
    (exp / "decode_test").mkdir()  # decoding writes beside the model: not an input
    (exp / "decode_test" / "text").write_text("x\n")
    assert isinstance(align_augmented(tmp_path / "aug", corpus.lang, exp, tmp_path / "ali"),
                      Skipped)
    shutil.rmtree(exp / "decode_test")


def test_a_copy_with_other_timing_is_an_error_naming_it(system, tmp_path):
    corpus, exp = system
    _write_aug_dir(corpus, tmp_path / "aug", rev_frames_delta=-3)
    first = sorted(read_table(corpus.data / "text"))[0]
    with pytest.raises(AsrdistError, match=f"rev1-{first}: the alignment of {first} has"):
        align_augmented(tmp_path / "aug", corpus.lang, exp, tmp_path / "ali", nj=1)


def test_copy_without_utt2uniq_is_refused(system, tmp_path):
    corpus, exp = system
    _write_aug_dir(corpus, tmp_path / "aug")
    (tmp_path / "aug" / "utt2uniq").unlink()
    with pytest.raises(AsrdistError, match="utt2uniq: no clean utterance for rev1-"):
        align_augmented(tmp_path / "aug", corpus.lang, exp, tmp_path / "ali", nj=1)
    shutil.rmtree(tmp_path / "aug")


def test_an_oov_word_in_a_speed_copy_needs_map_oov(system, tmp_path):
    corpus, exp = system
    _write_aug_dir(corpus, tmp_path / "aug")
    text = tmp_path / "aug" / "text"
    lines = text.read_text().splitlines()
    sp = next(i for i, line in enumerate(lines) if line.startswith("sp0.8-"))
    lines[sp] += " qq"
    text.write_text("\n".join(lines) + "\n")
    with pytest.raises(AsrdistError, match="word 'qq' is not in"):
        align_augmented(tmp_path / "aug", corpus.lang, exp, tmp_path / "ali", nj=1)
    summary = align_augmented(tmp_path / "aug", corpus.lang, exp, tmp_path / "ali", nj=1,
                              map_oov=True)
    assert summary is not None and summary.realigned + len(summary.failed) == 12


def test_boost_silence_realigns_again_and_a_non_positive_one_is_refused(system, tmp_path):
    corpus, exp = system
    _write_aug_dir(corpus, tmp_path / "aug")
    assert align_augmented(tmp_path / "aug", corpus.lang, exp, tmp_path / "ali", nj=1)
    boosted = align_augmented(tmp_path / "aug", corpus.lang, exp, tmp_path / "ali", nj=1,
                              boost_silence=1.25)
    assert boosted is not None and boosted.realigned == 12 and boosted.failed == []
    with pytest.raises(AsrdistError, match="--boost-silence 0.0: must be positive"):
        align_augmented(tmp_path / "aug", corpus.lang, exp, tmp_path / "ali", boost_silence=0.0)
