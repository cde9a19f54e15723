"""recipes/mini/run.sh end to end on a tiny corpus: every stage runs for real through its CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from asrdist.hmm.tree import read_tree
from asrdist.models.final import load_final
from asrdist.train.metrics import read_metrics

# a whole recipe runs in each test (on 2 busy cores, minutes); its subprocess has its own
# timeout, so a hang still fails
pytestmark = pytest.mark.timeout(900)

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "mini"


def run_recipe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run(
        [str(RECIPE / "run.sh"), "--data", str(tmp_path / "data"), "--exp", str(tmp_path / "exp"),
         *args],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )


@pytest.mark.heavy(260)
def test_all_stages_from_corpus_to_wer_table_then_a_rerun_skips_done_work(tmp_path):
    tiny = ["--hours", "0.1", "--test-hours", "0.004", "--algos", "adpsgd-random",
            "--aug-opts", "--speeds 0.9 --reverb-fraction 0.2 --noise-fraction 0.2",
            "--learners", "2", "--tri-opts", "--num-leaves 100 --total-gauss 400",
            "--train-opts", "--epochs 1 --units 16 --batch-size 8 --heldout-utts 3",
            "--seq-objectives", "smbr", "--seq-opts", "--epochs 1 --max-steps 4",
            "--decode-opts", "--beam 10 --lattice-beam 4 --max-active 300",
            "--denlats-opts", "--beam 8 --lattice-beam 3 --max-active 300"]
    first = run_recipe(tmp_path, *tiny)
    assert first.returncode == 0, first.stderr[-3000:]
    for n in range(9):
        assert re.search(rf"stage {n} \(.*\): done in \d+ s", first.stderr), f"stage {n} missing"

    exp = tmp_path / "exp"
    for name in ("ali.1.gz", "final.mdl", "tree", "num_jobs", "phones.txt"):
        assert (exp / "mono" / name).is_file()
        assert (exp / "tri1" / name).is_file()  # the default --gmm tri1: tied triphones
        assert (exp / "tri1_ali_aug" / name).is_file()
    assert read_tree(exp / "tri1" / "tree").context_width == 3
    assert re.search(r"tri1_ali_aug: \d+ clean kept, \d+ copied, \d+ realigned", first.stderr)
    assert (exp / "blstm_adpsgd-random" / "final.pt").is_file()
    assert (exp / "curves.png").is_file()
    results = (exp / "results.md").read_text()
    assert "| mono |" in results and "| tri1 |" in results
    assert "| blstm_adpsgd-random x2 |" in results
    # stage 8: the CE network's lattices of its training data over the unigram's graph, sMBR
    # (the default, given the lang's silence phones) from it, decoded and scored
    assert (exp / "graph_den" / "HCLG.fst").is_file()
    assert (exp / "blstm_adpsgd-random_denlats" / "lat.1.gz").is_file()
    _, smbr = load_final(exp / "blstm_adpsgd-random_smbr" / "final.pt")
    assert smbr.steps == 4 and smbr.algo == "adpsgd-random"
    assert "| blstm_adpsgd-random_smbr x2 |" in results
    assert re.search(r"%WER \d+\.\d+ \[ \d+ / \d+, \d+ ins, \d+ del, \d+ sub \]", results)
    assert "| espeak |" in results and "| flite |" in results and "| flite-rms |" in results

    kept = [exp / "tri1" / "ali.1.gz", exp / "tri1_pdf" / "pdf.ark",
            exp / "blstm_adpsgd-random" / "final.pt", tmp_path / "data" / "train_aug_mfcc" /
            "feats.scp", exp / "graph" / "HCLG.fst", exp / "graph_mono" / "HCLG.fst",
            exp / "mono" / "decode_test" / "text", exp / "tri1" / "decode_test" / "text"]
    before = [p.stat().st_mtime_ns for p in kept]
    again = run_recipe(tmp_path, *tiny, "--stop-stage", "6")
    assert again.returncode == 0, again.stderr[-3000:]
    assert [p.stat().st_mtime_ns for p in kept] == before
    skipped = re.findall(r"(\S+): (\w+) already done with these options and inputs; skipping "
                         r"\(remove \S+ to redo\)", again.stderr)
    stages = sorted({stage for _, stage in skipped})
    assert stages == ["align_aug", "align_gmm", "augment", "decode", "features", "ingest_ali",
                      "mkgraph", "prepare_mini", "train", "train_deltas"], again.stderr[-3000:]
    # mfcc of train (the GMM's), of train_aug and of test (the GMM's and the BLSTM's)
    assert len([s for s in skipped if s[1] == "features"]) == 3
    assert not list(tmp_path.glob("data/*_fbank"))
    assert "redoing" not in again.stderr
    _suchen_setup_on_the_same_data(tmp_path)


def _suchen_setup_on_the_same_data(tmp_path: Path) -> None:
    """--setup suchen from stage 4: RBM pretraining under 2 learners, the sigmoid DNN it
    initialises trained with NG-SGD and ma (--avg-frames), decoded and scored."""
    done = run_recipe(
        tmp_path, "--stage", "4", "--hours", "0.1", "--test-hours", "0.004", "--setup", "suchen",
        "--learners", "2", "--pretrain-opts", "--hidden-layers 2 --hidden-units 16 --batch-size 8",
        "--train-opts", "--hidden-layers 2 --hidden-units 16 --epochs 1 --batch-size 8 "
                        "--heldout-utts 3 --avg-frames 256",
        "--decode-opts", "--beam 10 --lattice-beam 4 --max-active 300")
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"stage 4 \(pretrain rbm x2\): done", done.stderr)
    exp = tmp_path / "exp"
    model, exported = load_final(exp / "dnn_suchen_ma" / "final.pt")
    assert exported.algo == "ma" and exported.world_size == 2
    assert exported.model_config.activation == "sigmoid"
    train = [r for r in read_metrics(exp / "dnn_suchen_ma" / "metrics.jsonl")
             if r["kind"] == "train"]
    assert train[-1]["avg_period"] == 4 and train[-1]["averages"] >= 1  # 256 / (8 x 8) frames
    assert "| dnn_suchen_ma x2 |" in (exp / "results.md").read_text()


@pytest.mark.heavy(40)
def test_augment_false_trains_on_the_clean_corpus_and_fbank_is_computed_when_asked(tmp_path):
    """Also --gmm mono: the networks' targets come from the monophones."""
    out = run_recipe(tmp_path, "--augment", "false", "--hours", "0.04", "--test-hours", "0.004",
                     "--nnet-feats", "fbank", "--stop-stage", "3", "--gmm", "mono")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "stage 0 (augment)" not in out.stderr and "align augmented" not in out.stderr
    data, exp = tmp_path / "data", tmp_path / "exp"
    assert not (data / "train_aug").exists() and not (exp / "mono_ali_aug").exists()
    assert (data / "train_fbank" / "feats.scp").is_file() and (data / "test_fbank").is_dir()
    assert "triphone GMM" not in out.stderr and not (exp / "tri1").exists()
    assert "train_fbank/feats.scp" in (exp / "mono_pdf" / "report.txt").read_text()
    clean = (data / "train" / "utt2spk").read_text().split("\n")
    assert not any(line.startswith(("sp0.9-", "sp1.1-")) for line in clean)


@pytest.mark.parametrize("args, message", [
    (("--epochs", "3"), "invalid option --epochs"),
    (("--nnet-feats", "plp"), "--nnet-feats plp: choose mfcc or fbank"),
    (("--augment", "maybe"), "option --augment takes true or false, not 'maybe'"),
    (("--setup", "tdnn"), "--setup tdnn: choose blstm, conformer, tdnnf or suchen"),
    (("--gmm", "tri3"), "--gmm tri3: choose mono or tri1"),
])
def test_a_bad_option_is_refused_before_any_work(tmp_path, args, message):
    out = run_recipe(tmp_path, *args)
    assert out.returncode != 0
    assert message in out.stderr
    assert not (tmp_path / "data").exists()
