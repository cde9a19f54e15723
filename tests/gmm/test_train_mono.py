"""Monophone training end to end on a synthetic corpus, and the alignment dir it writes."""

from __future__ import annotations

from pathlib import Path

import kaldi_hmm_gmm  # noqa: F401  (before anything that loads kaldifst)
import kaldiio
import numpy as np
import pytest

from asrdist.decode.acoustic import GmmScorer
from asrdist.errors import AsrdistError
from asrdist.fsutil import is_done
from asrdist.gmm import em as tm_module
from asrdist.gmm.decodable import gmm_decodable
from asrdist.gmm.train_mono import MonoOptions, train_mono
from asrdist.hmm.align import AlignOptions, matrix_decodable, viterbi_alignment
from asrdist.hmm.graphs import GraphCompiler
from asrdist.hmm.transitions import transition_model_with_log_probs
from asrdist.hmm.tree import monophone_tree
from asrdist.kaldi.alignments import read_alignments
from asrdist.kaldi.am_gmm import to_khg_am_diag_gmm
from asrdist.kaldi.data_dir import DataDir
from asrdist.kaldi.final_mdl import read_final_mdl
from asrdist.kaldi.gmm_feats import GMM_TABLES, load_features
from asrdist.kaldi.lang import Lang
from asrdist.stage import Skipped
from tests.gmm.synth_corpus import Corpus, make_corpus

OPTS = MonoOptions(nj=1, num_iters=10, total_gauss=60)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Corpus:
    return make_corpus(tmp_path_factory.mktemp("synth"))


@pytest.fixture(scope="module")
def trained(corpus: Corpus, tmp_path_factory):
    exp = tmp_path_factory.mktemp("exp") / "mono"
    return exp, train_mono(corpus.data, corpus.lang, exp, MonoOptions(nj=2, num_iters=10,
                                                                      total_gauss=60))


def test_likelihood_increases_and_all_utterances_align(corpus: Corpus, tmp_path: Path) -> None:
    summary = train_mono(corpus.data, corpus.lang, tmp_path / "mono", OPTS)
    lls = [r.log_like_per_frame for r in summary.iters]
    assert len(lls) == 10
    assert lls[-1] > lls[1] + 5.0  # nats per frame
    assert all(b > a - 0.5 for a, b in zip(lls[1:], lls[2:], strict=False))
    assert all(r.align_failed == 0 for r in summary.iters)
    assert summary.iters[-1].num_gauss > summary.iters[0].num_gauss
    assert summary.aligned == 20 and summary.failed == []


def test_passes_table_and_boosted_silence(corpus: Corpus, tmp_path: Path) -> None:
    """log/passes.tsv has one row per pass with its aligned/failed counts (RESULTS.md's
    flat-start table); silence boosted as WSJ's run.sh does still aligns everything."""
    opts = MonoOptions(nj=1, num_iters=4, total_gauss=40, boost_silence=1.25)
    summary = train_mono(corpus.data, corpus.lang, tmp_path / "mono", opts)
    lines = (tmp_path / "mono" / "log" / "passes.tsv").read_text().splitlines()
    assert lines[0].split("\t")[:4] == ["pass", "realigned", "aligned", "failed"]
    rows = [line.split("\t") for line in lines[1:]]
    assert [int(r[0]) for r in rows] == [0, 1, 2, 3]
    assert all(r[1:4] == ["1", "20", "0"] for r in rows)  # equal, then realigned each pass
    assert [float(r[4]) for r in rows] == pytest.approx(
        [r.log_like_per_frame for r in summary.iters], abs=1e-4)
    assert summary.aligned == 20


def test_alignment_dir_is_complete_kaldi_layout(trained) -> None:
    exp, summary = trained
    assert summary.aligned == 20
    for name in ("ali.1.gz", "ali.2.gz", "final.mdl", "tree", "phones.txt", "final.occs",
                 "log/train_mono.log", "log/passes.tsv"):
        assert (exp / name).is_file(), name
    assert (exp / "num_jobs").read_text().strip() == "2"
    assert not (exp / "ali.3.gz").exists()
    assert is_done(exp, "align_gmm")


def test_alignments_cover_every_frame_and_find_the_phones(corpus: Corpus, trained) -> None:
    exp, _ = trained
    info, am = read_final_mdl(exp / "final.mdl")
    assert am is not None and am.num_pdfs == info.num_pdfs == 19
    feats = kaldiio.load_scp(str(corpus.data / "feats.scp"))
    phones = {int(i): p for p, i in (line.split() for line in
                                    (corpus.lang / "phones.txt").read_text().splitlines())}
    alis = dict(read_alignments(exp / "ali.1.gz")) | dict(read_alignments(exp / "ali.2.gz"))
    assert sorted(alis) == sorted(corpus.true_phones)
    right = total = 0
    for utt, ali in alis.items():
        assert len(ali) == feats[utt].shape[0]
        got = [phones[int(p)] for p in info.tid_to_phone[ali]]
        right += sum(g == t for g, t in zip(got, corpus.true_phones[utt], strict=True))
        total += len(ali)
    assert right / total > 0.9


def phone_sequence(frame_phones: np.ndarray) -> list[int]:
    """Per-frame phones collapsed to the sequence of phone runs."""
    return [int(p) for i, p in enumerate(frame_phones) if i == 0 or p != frame_phones[i - 1]]


def test_final_mdl_rebuilds_for_decoding(corpus: Corpus, trained) -> None:
    """final.mdl alone gives back a model that realigns an utterance as training did.

    The rebuilt transition probabilities match to 2e-3, not bit for bit, so a frame on a
    near-tie may move: the phone sequence must be the same and almost every frame agree.
    """
    exp, _ = trained
    info, am_params = read_final_mdl(exp / "final.mdl")
    lang = Lang.load(corpus.lang)
    topo = lang.topology()
    tree = monophone_tree(topo, lang.phone_sets)
    tm = transition_model_with_log_probs(tree, topo, info.log_probs)
    assert np.allclose(np.exp(tm.log_probs), np.exp(info.log_probs), atol=2e-3)
    utt, ali = next(read_alignments(exp / "ali.1.gz"))
    data = DataDir.load(corpus.data, GMM_TABLES)
    graph = GraphCompiler(lang, tree, tm).compile(lang.word_ids(utt, data.text[utt], False))
    feats = load_features(data, [utt])[utt]
    opts = AlignOptions()
    am = to_khg_am_diag_gmm(am_params)  # the decodable points into it: keep it alive
    decodable = gmm_decodable(am, tm, feats, opts)
    res = viterbi_alignment(graph, decodable, len(feats), tm, utt, opts)
    assert res is not None
    realigned = np.asarray(res[0])
    assert len(realigned) == len(ali)
    assert phone_sequence(info.tid_to_phone[realigned]) == phone_sequence(info.tid_to_phone[ali])
    assert np.mean(realigned == ali) >= 0.95
    # The same likelihoods as a frames x pdfs matrix (how a network's reach the aligner)
    # give the same path.
    loglikes = GmmScorer(am_params, corpus.data).loglikes(feats)
    from_matrix = viterbi_alignment(graph, matrix_decodable(loglikes, info.tid_to_pdf, opts),
                                    len(feats), tm, utt, opts)
    assert from_matrix is not None
    np.testing.assert_array_equal(from_matrix[0], realigned)


def test_rerun_skips_a_finished_dir(corpus: Corpus, trained) -> None:
    exp, _ = trained
    before = (exp / "final.mdl").stat().st_mtime_ns
    assert train_mono(corpus.data, corpus.lang, exp, OPTS) == Skipped(exp, "align_gmm")
    assert (exp / "final.mdl").stat().st_mtime_ns == before


def test_interrupted_run_leaves_no_complete_looking_dir(corpus: Corpus, tmp_path: Path,
                                                        monkeypatch) -> None:
    exp = tmp_path / "mono"
    train_mono(corpus.data, corpus.lang, exp, MonoOptions(nj=1, num_iters=2, total_gauss=30))
    calls = []

    def dies(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return estimate(*args, **kwargs)

    estimate = tm_module.estimate
    monkeypatch.setattr(tm_module, "estimate", dies)
    (exp / ".align_gmm.done").unlink()  # ask for a rerun over the finished dir
    with pytest.raises(KeyboardInterrupt):
        train_mono(corpus.data, corpus.lang, exp, OPTS)
    assert not is_done(exp, "align_gmm")
    assert not (exp / "final.mdl").exists() and not list(exp.glob("ali.*.gz"))


def test_oov_word_is_an_error_naming_utterance_and_word(corpus: Corpus, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for name in ("feats.scp", "cmvn.scp", "utt2spk", "spk2utt"):
        (data / name).write_text((corpus.data / name).read_text())
    lines = (corpus.data / "text").read_text().splitlines()
    utt = lines[3].split()[0]
    lines[3] = f"{utt} a zebra"
    (data / "text").write_text("\n".join(lines) + "\n")
    with pytest.raises(AsrdistError, match=f"utterance {utt}: word 'zebra'"):
        train_mono(data, corpus.lang, tmp_path / "mono", OPTS)
    summary = train_mono(data, corpus.lang, tmp_path / "mono",
                         MonoOptions(nj=1, num_iters=3, total_gauss=30, map_oov=True))
    assert summary.aligned == 20


def test_max_utts_trains_on_shortest_and_aligns_all(corpus: Corpus, tmp_path: Path) -> None:
    opts = MonoOptions(nj=1, num_iters=6, total_gauss=40, max_utts=12)
    summary = train_mono(corpus.data, corpus.lang, tmp_path / "mono", opts)
    assert summary.num_train_utts == 12 and summary.num_utts == 20
    lengths = sorted(len(p) for p in corpus.true_phones.values())
    assert summary.iters[0].frames == sum(lengths[:12])
    assert summary.aligned == 20


def test_the_same_run_gives_the_same_model_and_another_seed_another(
        corpus: Corpus, trained, tmp_path: Path) -> None:
    """The mixing up's perturbations come from --seed (default 0), not from a generator seeded
    anew in each process: a second run of the same options writes the same final.mdl, byte
    for byte; seed 1 another model, and a seed of 0 is no part of the run's identity (runs made
    before the option existed stay done)."""
    exp, _ = trained
    options = {"nj": 2, "num_iters": 10, "total_gauss": 60}
    train_mono(corpus.data, corpus.lang, tmp_path / "again", MonoOptions(**options))
    assert (tmp_path / "again" / "final.mdl").read_bytes() == (exp / "final.mdl").read_bytes()
    train_mono(corpus.data, corpus.lang, tmp_path / "seed1", MonoOptions(**options, seed=1))
    assert (tmp_path / "seed1" / "final.mdl").read_bytes() != (exp / "final.mdl").read_bytes()
    assert "seed" not in MonoOptions(**options).identity()
    assert MonoOptions(**options, seed=1).identity()["seed"] == 1
