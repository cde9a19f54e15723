"""recipes/swbd300 and recipes/swbd2000 end to end on a miniature LDC tree, with the user's
Kaldi system made for it (data dirs by Kaldi's own scripts, alignments and graph from them):
every stage runs for real through its CLI, on route 1 (the user's data dirs) and route 2 (the
LDC releases, whose data dirs must then be Kaldi's: no alignment may go missing)."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import torch

from asrdist.kaldi.data_dir import read_table
from tests.corpus.ldc_fixture import make_ldc_tree
from tests.recipes.kaldi_swbd_system import make_kaldi_system

# a whole recipe runs in each test (on 2 busy cores, minutes); its subprocess has its own
# timeout, so a hang still fails
pytestmark = pytest.mark.timeout(1200)

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
SPEED = "0.9 1.0 1.1"
TINY = """model: blstm
layers: 1
units: 16
bottleneck: 8
chunk_len: 21
batch_size: 4
epochs: 2
heldout_utts: 2
log_every: 5
"""
KALDI_LINE = r"%WER \d+\.\d \| \d+ \d+ \| (\d+\.\d ){5}\d+\.\d \| \S+"


@pytest.fixture(scope="module")
def ldc(tmp_path_factory):
    root = tmp_path_factory.mktemp("swbd")
    tree = make_ldc_tree(root / "ldc")
    (root / "tiny.yaml").write_text(TINY)
    return root, tree


@pytest.fixture(scope="module")
def user(ldc):
    """The LDC tree and the swbd300 user's Kaldi system (s5c: alignments of train_nodup_sp,
    its 1.0 copy prefixed sp1.0-)."""
    root, tree = ldc
    return root, tree, make_kaldi_system(tree, root / "kaldi_s5c", fisher=False)


@pytest.fixture(scope="module")
def fisher_user(ldc):
    """The swbd2000 user's (fisher_swbd: alignments of its train_nodup_sp, Fisher + all of
    Switchboard, the 1.0 copy unprefixed)."""
    root, tree = ldc
    return root, tree, make_kaldi_system(tree, root / "kaldi_fisher", fisher=True)


def run_recipe(name: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run([str(RECIPES / name / "run.sh"), *args], capture_output=True,
                          text=True, env=env, timeout=900, check=False)


def _common(user, out: Path) -> list[str]:
    """The options of both routes: the user's alignments and graph (its GMM fails to align a
    few utterances, as Kaldi's do: :func:`_check_targets` sees that only those are missing)."""
    root, _, system = user
    return ["--ali-dir", str(system.ali_dir), "--graph-dir", str(system.graph_dir),
            "--train-config", str(root / "tiny.yaml"), "--device", "cpu", "--nj", "2",
            "--lmwts", "8 12", "--wips", "0.0 0.5", "--ingest-opts", "--max-missing 0.1",
            "--data", str(out / "data"), "--exp", str(out / "exp")]


def _check_targets(system, exp: Path, feats: Path) -> None:
    """Every utterance the user's Kaldi system aligned has features and targets; the only
    utterances without targets are those its alignment dir lacks (ids are Kaldi's)."""
    aligned = {utt for ali in system.ali_dir.glob("ali.*.gz")
               for utt, _ in kaldiio.load_ark(gzip.open(ali))}
    targets = set(read_table(exp / f"{system.ali_dir.name}_pdf" / "pdf.scp"))
    features = set(read_table(feats / "feats.scp"))
    assert aligned <= features and targets == aligned, (aligned ^ targets, aligned - features)


def _args(user, out: Path) -> list[str]:
    """Route 2: the LDC releases, prepared with the sizes the Kaldi-made dirs were made with."""
    _, tree, _ = user
    return ["--swbd-audio", str(tree.swbd_audio), "--ms98", str(tree.ms98),
            "--eval2000-audio", str(tree.eval2000_audio), "--eval2000-ref",
            str(tree.eval2000_ref), "--speed-perturb", SPEED, "--dev-utts", "4", "--max-dup", "2",
            "--allow-partial", "true",  # the fixture is a small corpus
            *_common(user, out)]


def _route1(user, out: Path) -> list[str]:
    """Route 1: the user's Kaldi data dirs, no LDC option."""
    _, _, system = user
    return ["--train-data", str(system.train_data), "--test-data", str(system.test_data),
            *_common(user, out)]


def _results(exp: Path, run: str) -> list[str]:
    """The lines of exp/RESULTS of ``run`` (each begins with its run dir's name), unprefixed."""
    lines = (exp / "RESULTS").read_text().splitlines()
    assert all(line.split()[0].startswith("blstm_") for line in lines), lines
    return [line.split(" ", 1)[1] for line in lines if line.startswith(f"{run} ")]


@pytest.mark.heavy(80)
def test_swbd300_every_stage_then_a_new_sweep_reuses_the_kept_scores(user, tmp_path):
    args = _args(user, tmp_path) + ["--algo", "adpsgd-random", "--learners", "2"]
    first = run_recipe("swbd300", *args)
    assert first.returncode == 0, first.stderr[-3000:]
    for n in range(6):
        assert re.search(rf"stage {n} \(.*\): done in \d+ s", first.stderr), f"stage {n}"
    exp = tmp_path / "exp"
    results = _results(exp, "blstm_adpsgd-random_n2")
    assert len(results) == 3 and all(re.fullmatch(KALDI_LINE, line) for line in results)
    assert [line.split()[4] for line in results] == ["35", "17", "18"]  # words: all, sw_, en_
    assert results[1].endswith(".swbd.filt.sys") and results[2].endswith(".callhm.filt.sys")
    decode = exp / "blstm_adpsgd-random_n2" / "decode_eval2000_graph_sw1_tg"
    hyps = [line for d in decode.glob("score_*") for line in (d / "ctm").read_text().splitlines()]
    ctm = [line.split() for d in decode.glob("score_*")
           for line in (d / "eval2000.ctm").read_text().splitlines()]
    # the tiny model may hypothesise only words scoring filters out (a partial word, "th-"),
    # so eval2000.ctm may be empty; every line it has is on a side of the test conversations
    assert hyps and all(f[0] in ("en_4156", "sw_4390") and f[1] in "AB" for f in ctm)
    system = user[2]
    for made in (system.train_data, system.test_data):  # route 2's data dirs are Kaldi's
        for name in ("text", "segments", "utt2spk"):
            ours = tmp_path / "data" / made.name / name
            assert ours.read_text() == (made / name).read_text(), ours
    _check_targets(system, exp, tmp_path / "data" / "train_nodup_sp_fbank")
    assert (exp / "tri4_ali_nodup_sp_pdf" / "pdf.scp").read_text().startswith("sp0.9-sw02001-A_")
    assert "sp1.0-sw02005-B_" in (exp / "tri4_ali_nodup_sp_pdf" / "pdf.scp").read_text()

    again = run_recipe("swbd300", *args, "--stage", "4", "--lmwts", "10")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "loglikes already done with these options and inputs; skipping" in again.stderr
    assert "decode was done with other options or inputs (lmwts [8.0, 12.0] -> [10.0])" \
        in again.stderr
    assert (decode / "score_10_0.5" / "eval2000.ctm.filt.sys").is_file()
    assert len((exp / "RESULTS").read_text().splitlines()) == 3  # the run's lines replaced


@pytest.mark.heavy(80)
@pytest.mark.parametrize("recipe, name", [("swbd300", "user"), ("swbd2000", "fisher_user")])
def test_route1_takes_the_users_kaldi_data_dirs_as_they_are(recipe, name, request, tmp_path):
    system = request.getfixturevalue(name)[2]
    # --rescore-lm: the graph's own trigram, gzipped, as a stand-in for s5c's 4-gram; the old
    # LM's lang dir as Kaldi's data/lang_sw1_tg (G.fst, words.txt, phones/; no final.mdl)
    lm = tmp_path / "sw1_fsh.o4g.kn.gz"
    lm.write_bytes(gzip.compress((system.graph_dir / "lm.arpa").read_bytes()))
    lang = tmp_path / "lang_sw1_tg"
    (lang / "phones").mkdir(parents=True)
    for part in ("G.fst", "words.txt", "phones/align_lexicon.int"):
        (lang / part).write_bytes((system.graph_dir / part).read_bytes())
    proc = run_recipe(recipe, *_route1(request.getfixturevalue(name), tmp_path),
                      "--algo", "ssgd", "--rescore-lm", str(lm), "--rescore-old-lang", str(lang))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"stage 0 (data): your Kaldi data dirs {system.train_data} and " \
           f"{system.test_data}, as they are" in proc.stderr
    for n in range(1, 6):
        assert re.search(rf"stage {n} \(.*\): done in \d+ s", proc.stderr), f"stage {n}"
    assert not (tmp_path / "data" / "train_nodup_sp").exists()  # nothing prepared
    # every utterance of Kaldi's train_nodup_sp got features from its sph2pipe | sox pipe
    # (neither installed: read in-process) and its alignment
    feats = read_table(tmp_path / "data" / "train_nodup_sp_fbank" / "feats.scp")
    assert set(feats) == set(read_table(system.train_data / "text"))
    _check_targets(system, tmp_path / "exp", tmp_path / "data" / "train_nodup_sp_fbank")
    results = _results(tmp_path / "exp", "blstm_ssgd_n1")
    assert len(results) == 3 and all(re.fullmatch(KALDI_LINE, line) for line in results)
    # the rescoring stage: the fg decode dir beside the tg one, its rows beside the tg rows
    assert re.search(r"stage 4 \(rescore sw1_fsh_fg\): done in \d+ s", proc.stderr)
    fg = tmp_path / "exp" / "blstm_ssgd_n1" / "decode_eval2000_sw1_fsh_fg"
    assert (fg / "lat.1.gz").is_file() and (fg / "score_8_0.0" / "ctm").is_file()
    rescored = _results(tmp_path / "exp", "blstm_ssgd_n1_sw1_fsh_fg")
    assert len(rescored) == 3 and all(re.fullmatch(KALDI_LINE, line) for line in rescored)


def test_route1_needs_both_dirs_and_the_s5c_acronyms(user, tmp_path):
    args = _route1(user, tmp_path)
    proc = run_recipe("swbd300", *args[:2], *args[4:])
    assert proc.returncode == 1
    assert "--test-data '': required: give your Kaldi data/eval2000" in proc.stderr
    (user[2].test_data.parent / "local" / "dict_nosp" / "acronyms.map").rename(
        tmp_path / "acronyms.map")
    try:
        proc = run_recipe("swbd300", *args)
    finally:
        (tmp_path / "acronyms.map").rename(
            user[2].test_data.parent / "local" / "dict_nosp" / "acronyms.map")
    assert proc.returncode == 1
    assert "--acronyms '': required with --test-data when" in proc.stderr
    assert not (tmp_path / "data").exists()


def _ivectors(features: Path, out: Path) -> str:
    """An online-i-vector-like scp: 5 values every 10 frames of each utterance."""
    rng = np.random.default_rng(0)
    with kaldiio.WriteHelper(f"ark,scp:{out}.ark,{out}.scp") as writer:
        for utt, frames in read_table(features / "utt2num_frames").items():
            writer(utt, rng.normal(size=(-(-int(frames) // 10), 5)).astype(np.float32))
    return f"{out}.scp:10"


@pytest.mark.heavy(50)
def test_swbd2000_adds_fisher_and_extra_streams_and_runs_every_stage(fisher_user, tmp_path):
    root, tree, system = fisher_user
    extra = f"{system.train_mfcc / 'feats.scp'} {_ivectors(system.train_mfcc, tmp_path / 'iv')}"
    extra_test = (f"{system.test_mfcc / 'feats.scp'} "
                  f"{_ivectors(system.test_mfcc, tmp_path / 'iv_test')}")
    args = _args(fisher_user, tmp_path) + ["--fisher-audio", str(tree.fisher_audio),
                                    "--fisher-text", str(tree.fisher_text), "--algo", "ssgd",
                                    "--extra-feats", extra, "--extra-test-feats", extra_test]
    proc = run_recipe("swbd2000", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for n in range(6):
        assert re.search(rf"stage {n} \(.*\): done in \d+ s", proc.stderr), f"stage {n}"
    for name in ("text", "segments", "utt2spk"):  # route 2's data dirs are Kaldi's
        assert (tmp_path / "data" / "train_nodup_sp" / name).read_text() == \
            (system.train_data / name).read_text(), name
    _check_targets(system, tmp_path / "exp", tmp_path / "data" / "train_nodup_sp_input")
    feats = (tmp_path / "data" / "train_nodup_sp_fbank" / "feats.scp").read_text()
    assert "sp1.1-fe_03_00001-B-" in feats and "\nfe_03_00001-B-" in feats  # 1.0: no prefix
    joined = kaldiio.load_scp(str(tmp_path / "data" / "train_nodup_sp_input" / "feats.scp"))
    # fbank + deltas + "fMLLR" + i-vectors
    assert next(iter(joined.values())).shape[1] == 3 * 40 + 13 + 5
    model = torch.load(tmp_path / "exp" / "blstm_ssgd_n1" / "final.pt", weights_only=True)
    assert model["input_dim"] == 138
    results = _results(tmp_path / "exp", "blstm_ssgd_n1")
    assert len(results) == 3 and all(re.fullmatch(KALDI_LINE, line) for line in results)


@pytest.mark.parametrize("change, message", [
    (("--ali-dir", ""), "--ali-dir '': required: give a Kaldi alignment dir"),
    (("--graph-dir", "ALI"), "has no HCLG.fst (expected a Kaldi graph dir"),
    (("--ms98", "AUDIO"), "no sw*-ms98-a-trans.text under it (expected swb_ms98_transcriptions"),
])
def test_a_missing_or_wrong_path_stops_at_once_naming_the_option(user, tmp_path, change,
                                                                  message):
    _, tree, system = user
    args = _args(user, tmp_path)
    value = {"ALI": str(system.ali_dir), "AUDIO": str(tree.swbd_audio)}.get(change[1], change[1])
    args[args.index(change[0]) + 1] = value
    proc = run_recipe("swbd300", *args)
    assert proc.returncode == 1
    assert f"{change[0]} " in proc.stderr and message in proc.stderr
    assert not (tmp_path / "data").exists()


def test_swbd2000_needs_fisher(user, tmp_path):
    proc = run_recipe("swbd2000", *_args(user, tmp_path))
    assert proc.returncode == 1
    assert "--fisher-audio '': required: give LDC2004S13 and LDC2005S13" in proc.stderr


def _kaldi_dirs(root: Path) -> list[str]:
    """Route 1's options over a Kaldi system that has every file the checks look for (empty:
    nothing runs past the checks in the tests below)."""
    files = {"data/train_nodup_sp": ("wav.scp", "utt2spk"),
             "data/eval2000": ("wav.scp", "utt2spk", "stm", "glm"),
             "data/local/dict_nosp": ("acronyms.map",), "ali": ("final.mdl", "num_jobs",
                                                                "ali.1.gz"),
             "graph": ("HCLG.fst", "words.txt")}
    for folder, names in files.items():
        (root / folder).mkdir(parents=True)
        for name in names:
            (root / folder / name).touch()
    return ["--train-data", str(root / "data/train_nodup_sp"), "--test-data",
            str(root / "data/eval2000"), "--ali-dir", str(root / "ali"), "--graph-dir",
            str(root / "graph"), "--data", str(root / "out"), "--stop-stage", "0"]


@pytest.mark.parametrize("recipe", ["swbd300", "swbd2000"])
def test_route1_needs_no_ldc_option_and_checks_the_dirs_files(recipe, tmp_path):
    args = _kaldi_dirs(tmp_path)
    proc = run_recipe(recipe, *args)
    assert proc.returncode == 0, proc.stderr
    assert "stage 0 (data): your Kaldi data dirs" in proc.stderr
    (tmp_path / "data/train_nodup_sp/wav.scp").unlink()
    proc = run_recipe(recipe, *args)
    assert proc.returncode == 1
    assert "--train-data " in proc.stderr and "has no wav.scp" in proc.stderr
    proc = run_recipe(recipe, *args, "--train-feats", str(tmp_path / "data/eval2000"))
    assert proc.returncode == 1  # the features come from --train-feats: its feats.scp
    assert "--train-feats " in proc.stderr and "has no feats.scp" in proc.stderr


def test_route1_an_acronym_map_that_is_not_there_is_refused(tmp_path):
    proc = run_recipe("swbd300", *_kaldi_dirs(tmp_path), "--acronyms", str(tmp_path / "nope"))
    assert proc.returncode == 1
    assert f"--acronyms '{tmp_path / 'nope'}': no such file" in proc.stderr
