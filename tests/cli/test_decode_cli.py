"""asrdist-decode as a process, then asrdist-score: GMM and hybrid paths, sweeps, bad input."""

from __future__ import annotations

import contextlib
import errno
import gzip
import shutil

import kaldiio
import numpy as np
import pytest
import torch
from click.testing import CliRunner

from asrdist import fsutil, stage
from asrdist.cli.decode import main as decode_main
from asrdist.data.features import FeatureOptions, feats_config
from asrdist.decode.graph import make_graph
from asrdist.decode.lattice import best_path_words
from asrdist.decode.lattice_io import iter_lattices_binary
from asrdist.kaldi.feats_config import write_feats_config
from asrdist.testing.tiny_system import make_system, write_identity_nnet, write_test_data
from tests.cli_process import run_cli

SENTENCES = {"v1-u1": "dog sit on cat", "v1-u2": "cat sat", "v2-u3": "sit", "v2-u4": "dog sat"}


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    sys_ = make_system(tmp_path_factory.mktemp("decode_cli") / "sys")
    make_graph(sys_.lang, sys_.mono / "final.mdl", sys_.train_text, sys_.root / "graph")
    return sys_


def test_gmm_decode_recovers_sentences_and_scores_zero(system):
    data = system.root / "test_mfcc"
    write_test_data(system, data, SENTENCES, "gmm")
    out = system.root / "decode_gmm"
    proc = run_cli("decode", "--graph", str(system.root / "graph"), "--gmm",
                str(system.mono / "final.mdl"), "--data", str(data), "--nj", "2",
                "--lmwt", "5 10", "--wip", "0.0 1.0", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "RTF" in proc.stderr
    hyps = dict(line.split(maxsplit=1) for line in (out / "text").read_text().splitlines())
    assert hyps == SENTENCES
    assert sorted(p.name for p in out.glob("score_*")) == [
        "score_10_0.0", "score_10_1.0", "score_5_0.0", "score_5_1.0"]
    ctm = [line.split() for line in (out / "ctm").read_text().splitlines()]
    assert ctm[0] == ["v1-u1", "1", "0.150", "0.270", "dog"]  # nbest-to-ctm's 3 digits
    assert [f[4] for f in ctm if f[0] == "v1-u1"] == "dog sit on cat".split()
    assert (out / "log" / "decode.log").read_text().startswith("# asrdist-decode --graph")
    assert (out / "num_jobs").read_text() == "2\n"  # Kaldi's layout: lat.N.gz per job
    lats = {u: lat for n in (1, 2) for u, lat in
            iter_lattices_binary(gzip.decompress((out / f"lat.{n}.gz").read_bytes()))}
    id2word = {int(i): w for w, i in (line.split() for line in
                                       (out / "words.txt").read_text().splitlines())}
    assert {u: " ".join(id2word[w] for w in best_path_words(lat, 5.0, 1.0))
            for u, lat in lats.items()} == dict(
        line.split(maxsplit=1) for line in (out / "score_5_1.0" / "text").read_text().splitlines())

    score = run_cli("score", "text", "--subsets-by", "spk", str(data / "text"), str(out))
    assert score.returncode == 0, score.stderr
    assert score.stdout.splitlines()[0].startswith("%WER 0.00 [ 0 / 9, 0 ins, 0 del, 0 sub ]")
    assert "best: %WER 0.00" in score.stdout


def test_hybrid_decode_with_final_pt_skips_when_done_and_redoes_for_a_new_model(system):
    data = system.root / "test_fbank"
    write_test_data(system, data, SENTENCES, "nnet")
    write_identity_nnet(system, system.root / "final.pt")
    out = system.root / "decode_nnet"
    args = ("--graph", str(system.root / "graph"), "--model", str(system.root / "final.pt"),
            "--data", str(data), "--out", str(out))
    proc = run_cli("decode", *args)
    assert proc.returncode == 0, proc.stderr
    hyps = dict(line.split(maxsplit=1) for line in (out / "text").read_text().splitlines())
    assert hyps == SENTENCES

    decoded = (out / "text").stat()
    again = run_cli("decode", *args, "--nj", "2")  # --nj does not change the output: skipped
    assert again.returncode == 0, again.stderr
    assert (f"{out}: decode already done with these options and inputs; skipping "
            f"(remove {out / '.decode.done'} to redo)") in again.stderr
    assert "RTF" not in again.stderr
    assert (out / "text").stat().st_mtime_ns == decoded.st_mtime_ns

    wider = run_cli("decode", *args, "--beam", "13")  # another option: decoded again
    assert wider.returncode == 0, wider.stderr
    assert "decode was done with other options or inputs (beam 15.0 -> 13.0); redoing it" \
        in wider.stderr and "RTF" in wider.stderr
    assert (out / "text").stat().st_mtime_ns != decoded.st_mtime_ns

    record = torch.load(system.root / "final.pt", weights_only=True)
    torch.save({**record, "steps": 1}, system.root / "final.pt")  # a retrained model
    retrained = run_cli("decode", *args, "--beam", "13")
    assert retrained.returncode == 0, retrained.stderr
    assert f"input {system.root / 'final.pt'} changed" in retrained.stderr
    assert "RTF" in retrained.stderr


def test_model_not_matching_graph_is_refused_before_decoding(system, tmp_path):
    other = make_system(tmp_path / "other")  # same phones, but we shrink its pdf count below
    write_test_data(system, tmp_path / "data", SENTENCES, "nnet")
    (tmp_path / "graph").mkdir()
    for name in ("HCLG.fst", "words.txt"):
        (tmp_path / "graph" / name).write_bytes((system.root / "graph" / name).read_bytes())
    (tmp_path / "graph" / "num_pdfs").write_text(f"{other.trans.num_pdfs + 3}\n")
    write_identity_nnet(system, tmp_path / "final.pt")
    proc = run_cli("decode", "--graph", str(tmp_path / "graph"), "--model",
                str(tmp_path / "final.pt"), "--trans-mdl", str(other.mono / "final.mdl"),
                "--data", str(tmp_path / "data"), "--out", str(tmp_path / "decode"))
    assert proc.returncode == 1
    assert "the graph does not belong to this model" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "decode" / "text").exists()


def test_empty_test_set_is_refused(system, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "feats.scp").write_text("")
    proc = run_cli("decode", "--graph", str(system.root / "graph"), "--gmm",
                str(system.mono / "final.mdl"), "--data", str(tmp_path / "data"),
                "--out", str(tmp_path / "decode"))
    assert proc.returncode == 1
    assert "empty test set" in proc.stderr.strip().splitlines()[-1]


def test_missing_graph_dir_is_one_line_error(tmp_path):
    proc = run_cli("decode", "--graph", str(tmp_path / "nograph"), "--gmm", str(tmp_path / "m"),
                "--data", str(tmp_path / "data"), "--out", str(tmp_path / "decode"))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: {tmp_path / 'nograph' / 'HCLG.fst'}: missing (run asrdist-mkgraph)")


@pytest.mark.parametrize("args, message", [
    (("--nj", "0", "--gmm", "m"), "--nj 0: must be at least 1"),
    ((), "give exactly one of --model (final.pt) and --gmm (final.mdl)"),
    (("--model", "a.pt", "--gmm", "m"),
     "give exactly one of --model (final.pt) and --gmm (final.mdl)"),
    (("--gmm", "m", "--frames-per-chunk", "0"),
     "--frames-per-chunk and --extra-left/right-context say how a --model network is run; "
     "the scores of --gmm and --loglikes take none"),
])
def test_bad_options_are_refused(tmp_path, args, message):
    proc = run_cli("decode", "--graph", str(tmp_path), "--data", str(tmp_path),
                "--out", str(tmp_path / "decode"), *args)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"Error: {message}"
    assert not (tmp_path / "decode").exists()


def test_a_sweep_that_is_not_numbers_is_refused(tmp_path):
    proc = run_cli("decode", "--graph", str(tmp_path), "--data", str(tmp_path), "--gmm", "m",
                   "--out", str(tmp_path / "decode"), "--lmwt", "7 x")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "Error: Invalid value for --lmwt: '7 x': give numbers")
    assert not (tmp_path / "decode").exists()


def test_missing_transition_model_is_refused(tmp_path):
    graph, data = tmp_path / "graph", tmp_path / "data"
    graph.mkdir()
    data.mkdir()
    for name in ("HCLG.fst", "words.txt"):
        (graph / name).write_text("")
    (data / "feats.scp").write_text("u1 feats.ark:4\n")
    proc = run_cli("decode", "--graph", str(graph), "--model", str(tmp_path / "final.pt"),
                "--data", str(data), "--out", str(tmp_path / "decode"))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: {graph / 'final.mdl'}: missing; pass the model's final.mdl with --trans-mdl")


def test_unreadable_or_non_finite_input_is_one_line_error(system, tmp_path):
    """A missing ark, a bad byte offset, NaN features (once "no path survived the beam", exit
    0) and a file that is not a final.pt: one line naming it, exit 1, no traceback."""
    data = tmp_path / "data"
    write_test_data(system, data, SENTENCES, "nnet")
    write_identity_nnet(system, tmp_path / "final.pt")
    scp = (data / "feats.scp").read_text().splitlines()
    utt, rx = scp[0].split()
    ark, offset = rx.rsplit(":", 1)
    nan = kaldiio.load_mat(rx).copy()
    nan[2] = np.nan
    kaldiio.save_ark(str(tmp_path / "nan.ark"), {utt: nan})
    nan_rx = f"{tmp_path / 'nan.ark'}:{len(utt) + 1}"
    (tmp_path / "other.pt").write_text("not a model\n")
    cases = [  # first feats.scp entry, model, what the error line says
        (f"{tmp_path / 'gone.ark'}:{offset}", "final.pt", f"utterance {utt}: cannot read"),
        (f"{ark}:{int(offset) + 3}", "final.pt", f"utterance {utt}: cannot read features"),
        (nan_rx, "final.pt", f"utterance {utt}: features hold NaN or inf"),
        (rx, "other.pt", f"{tmp_path / 'other.pt'}: not a readable asrdist final.pt"),
    ]
    for entry, model, message in cases:
        (data / "feats.scp").write_text("\n".join([f"{utt} {entry}", *scp[1:]]) + "\n")
        proc = run_cli("decode", "--graph", str(system.root / "graph"), "--model",
                    str(tmp_path / model), "--data", str(data), "--out", str(tmp_path / "dec"))
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode == 1 and last.startswith("Error: ") and message in last, \
            proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr
        assert not (tmp_path / "dec" / "text").exists()


def test_graph_words_txt_missing_a_word_is_one_line_error(system, tmp_path):
    """A words.txt that lacks a word the graph outputs (the graph was built with another one):
    one line naming the file, the id and the utterance, as int2sym.pl refuses it; no traceback."""
    graph = tmp_path / "graph"
    shutil.copytree(system.root / "graph", graph)
    lines = (graph / "words.txt").read_text().splitlines(keepends=True)
    dog_id = next(int(line.split()[1]) for line in lines if line.split()[0] == "dog")
    (graph / "words.txt").write_text("".join(x for x in lines if x.split()[0] != "dog"))
    data = tmp_path / "data"
    write_test_data(system, data, {"v1-u2": "cat sat", "v2-u4": "dog sat"}, "gmm")
    proc = run_cli("decode", "--graph", str(graph), "--gmm", str(system.mono / "final.mdl"),
                   "--data", str(data), "--out", str(tmp_path / "decode"))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: decode job 1/1: {graph / 'words.txt'}: no word has id {dog_id}, which the "
        "graph outputs for utterance v2-u4 (HCLG.fst built with another words.txt?)")
    assert not (tmp_path / "decode" / "text").exists()


def test_full_disk_names_the_output_being_written(system, tmp_path, monkeypatch):
    """A write's OSError names no file (a full disk met at the flush): the one-line error says
    which output it was, and the decode dir is not marked done."""
    data = tmp_path / "data"
    write_test_data(system, data, SENTENCES, "gmm")

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fsutil.os, "fsync", disk_full)
    out = tmp_path / "decode"
    result = CliRunner().invoke(decode_main, [
        "--graph", str(system.root / "graph"), "--gmm", str(system.mono / "final.mdl"),
        "--data", str(data), "--out", str(out)])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        f"Error: decode job 1/1: {out / 'lat.1.gz'}: cannot write lattices: No space left on "
        "device")
    assert not (out / ".decode.done").exists() and not list(out.glob(".*.tmp"))


def test_features_made_otherwise_are_refused_naming_model_and_features(system, tmp_path):
    """8 kHz features of a 16 kHz model's dimension decoded to words with exit status 0: now
    one line naming the features' record and the model, before the graph is read; the same
    features recorded as the model's decode."""
    trained_on = feats_config(FeatureOptions("fbank"))
    data = tmp_path / "test_8k"
    write_test_data(system, data, SENTENCES, "nnet")
    write_feats_config(data, feats_config(FeatureOptions("fbank", sample_rate=8000)))
    final = tmp_path / "final.pt"
    write_identity_nnet(system, final, feats_config=trained_on)
    out = tmp_path / "decode"
    args = ("--graph", str(system.root / "graph"), "--model", str(final), "--data", str(data),
            "--out", str(out))
    proc = run_cli("decode", *args)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: {data / 'feats_config.json'}: these features do not match those {final} was "
        "trained on: sampling_rate 8000 (the model's 16000); make them with the training "
        "features' options")
    assert not (out / "text").exists()
    write_feats_config(data, trained_on)
    proc = run_cli("decode", *args)
    assert proc.returncode == 0, proc.stderr
    assert dict(line.split(maxsplit=1) for line in (out / "text").read_text().splitlines()) \
        == SENTENCES
def test_a_full_disk_at_the_done_marker_names_it(system, tmp_path, monkeypatch):
    """The marker is written last: a disk that fills there was "Error: No space left on
    device", naming no file."""
    data = tmp_path / "data"
    write_test_data(system, data, SENTENCES, "gmm")

    @contextlib.contextmanager
    def full_disk(path, mode="w"):
        raise OSError(errno.ENOSPC, "No space left on device")
        yield

    monkeypatch.setattr(stage, "atomic_write", full_disk)
    out = tmp_path / "decode"
    result = CliRunner().invoke(decode_main, [
        "--graph", str(system.root / "graph"), "--gmm", str(system.mono / "final.mdl"),
        "--data", str(data), "--out", str(out)])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        f"Error: {out / '.decode.done'}: cannot write the done marker: No space left on device")
    assert not (out / ".decode.done").exists()
