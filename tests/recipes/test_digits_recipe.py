"""recipes/digits/run.sh end to end on a few dozen real FSDD clips, with a --test-corpus."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_corpora import real_corpus

pytestmark = pytest.mark.timeout(600)

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "digits"


def _corpus(root: Path, fsdd: Path, names: list[str]) -> Path:
    (root / "recordings").mkdir(parents=True)
    for name in names:
        os.symlink(fsdd / "recordings" / name, root / "recordings" / name)
    return root


def run_recipe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run(
        [str(RECIPE / "run.sh"), "--data", str(tmp_path / "data"), "--exp", str(tmp_path / "exp"),
         *args], capture_output=True, text=True, env=env, timeout=500, check=False)


@pytest.mark.heavy(170)
def test_all_stages_on_real_clips_with_a_test_corpus_then_a_rerun_skips(tmp_path):
    fsdd = real_corpus("fsdd")
    train_and_test = [f"{d}_{s}_{i}.wav" for s in ("george", "jackson", "lucas", "nicolas")
                      for d in range(10) for i in (0,)]
    corpus = _corpus(tmp_path / "fsdd", fsdd, train_and_test)
    kept_back = _corpus(tmp_path / "kept_back", fsdd,
                        [f"{d}_nicolas_{i}.wav" for d in range(10) for i in (30,)])
    # one job each (the mini recipe's test runs two): a job's start costs more than its clips
    tiny = ["--corpus", str(corpus), "--test-corpus", str(kept_back), "--nj", "1",
            "--aug-opts", "--speeds 0.9 --reverb-fraction 0.2 --noise-fraction 0.2",
            "--mono-gauss", "40", "--tri1-leaves", "20", "--tri1-gauss", "40", "--sat-leaves", "20",
            "--sat-gauss", "40", "--fmllr-passes", "2", "--train-opts",
            "--epochs 1 --units 16 --layers 1 --batch-size 8 --heldout-utts 3"]
    first = run_recipe(tmp_path, *tiny)
    assert first.returncode == 0, first.stderr[-3000:]
    for n in range(8):
        assert re.search(rf"stage {n} \(.*\): done in \d+ s", first.stderr), f"stage {n} missing"

    data, exp = tmp_path / "data", tmp_path / "exp"
    assert len((data / "train" / "text").read_text().splitlines()) == 30
    assert len((data / "kept_back_mfcc" / "feats.scp").read_text().splitlines()) == 10
    config = json.loads((data / "test_mfcc" / "feats_config.json").read_text())
    assert config["sampling_rate"] == 8000 and config["high_freq"] == 0.0  # Kaldi's 4 kHz edge
    assert (exp / "tri1_ali_aug" / "ali.1.gz").is_file()  # the networks learn tri1's pdfs
    # tri3 decodes each test set through its speakers' fMLLR transforms: the first from the
    # decode with its speaker-independent final.alimdl, the second on top of it from tri3's
    # decode with the first
    assert (exp / "tri3" / "trans.ark").is_file()
    assert (exp / "tri3" / "decode_kept_back.si" / "text").is_file()
    assert (exp / "tri3" / "trans_kept_back_1.ark").is_file()
    assert (exp / "tri3" / "decode_kept_back_pass1" / "text").is_file()
    assert (exp / "tri3" / "trans_kept_back_2.ark").is_file()
    assert (exp / "blstm_ssgd" / "final.pt").is_file()
    assert not (exp / "mono" / "graph" / "lm.arpa").exists()  # the grammar, not an LM
    rows = (exp / "RESULTS").read_text().splitlines()
    assert [r.split(" %WER")[0] for r in rows] == [
        "mono test", "tri1 test", "tri3 test", "blstm_ssgd x2 test",
        "mono kept_back", "tri1 kept_back", "tri3 kept_back", "blstm_ssgd x2 kept_back"]
    for row in rows:
        assert re.search(r"%WER \d+\.\d+ \[ \d+ / 10, 0 ins, 0 del, \d+ sub \]", row), row
    results = (exp / "results.md").read_text()
    assert "| mono kept_back |" in results and "| blstm_ssgd x2 test |" in results

    kept = [exp / "blstm_ssgd" / "final.pt", exp / "tri1" / "final.mdl",
            exp / "tri3" / "decode_test" / "text",
            exp / "tri1" / "graph" / "HCLG.fst",
            exp / "blstm_ssgd" / "decode_kept_back" / "text"]
    before = [p.stat().st_mtime_ns for p in kept]
    # from stage 2: the GMMs' identities are their alignment dirs' model and alignments, not
    # the whole dir, where the graphs and decodes below exp/mono came after tri1 trained
    again = run_recipe(tmp_path, *tiny, "--stage", "2", "--stop-stage", "6")
    assert again.returncode == 0, again.stderr[-3000:]
    assert [p.stat().st_mtime_ns for p in kept] == before
    for stage in ("align_gmm", "train_deltas", "train_sat"):
        assert f"{stage} already done with these options and inputs" in again.stderr, stage


def test_an_unknown_first_pass_is_one_line_before_any_stage(tmp_path):
    bad = run_recipe(tmp_path, "--sat-first-pass", "tri2")
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].endswith(
        "--sat-first-pass tri2: choose si, mono or tri1")
    assert "stage 0" not in bad.stderr and not (tmp_path / "data").exists()
