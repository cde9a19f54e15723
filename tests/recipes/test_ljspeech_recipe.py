"""recipes/ljspeech/run.sh end to end on a few dozen real LJSpeech clips (a publisher-layout dir
of symlinks), with a second tiny corpus as --test-corpus: every stage runs for real, every
system (mono, tri1, tri2, the BLSTM on tri2's alignments) with tiny options and one job each
(about 50 CLI starts, each importing torch/lhotse, make most of its time)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_corpora import real_corpus

pytestmark = pytest.mark.timeout(600)

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "ljspeech"
TRAIN = [f"LJ001-{i:04d}" for i in range(1, 31)]
TEST = [f"LJ002-{i:04d}" for i in range(1, 9)]
HELDOUT = [f"LJ001-{i:04d}" for i in range(181, 185)]
# LM text only (no audio): more of chapter 1, chapter 2 after its kept-back clips
# (LJ002-0009..0200 never enter the LM) and chapter 3's first lines: 120 sentences (the
# graphs' and LMs' cost grows with them)
TEXT_ONLY = ([f"LJ001-{i:04d}" for i in range(31, 91)] +
             [f"LJ002-{i:04d}" for i in range(201, 241)] + [f"LJ003-{i:04d}" for i in range(1, 21)])


def _publisher_dir(root: Path, source: Path, audio: list[str], text_only: list[str]) -> Path:
    lines = {line.split("|")[0]: line for line in
             (source / "metadata.csv").read_text(encoding="utf-8").splitlines()}
    (root / "wavs").mkdir(parents=True)
    for clip in audio:
        (root / "wavs" / f"{clip}.wav").symlink_to(source / "wavs" / f"{clip}.wav")
    (root / "metadata.csv").write_text("".join(lines[c] + "\n" for c in audio + text_only),
                                       encoding="utf-8")
    return root


def run_recipe(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    return subprocess.run(
        [str(RECIPE / "run.sh"), "--data", str(tmp_path / "data"), "--exp", str(tmp_path / "exp"),
         *args], capture_output=True, text=True, env=env, timeout=500, check=False)


@pytest.mark.heavy(180)
def test_all_stages_on_real_clips_with_a_second_test_corpus(tmp_path: Path) -> None:
    source = real_corpus("ljspeech-part") / "LJSpeech-1.1"
    corpus = _publisher_dir(tmp_path / "LJSpeech-1.1", source, TRAIN + TEST, TEXT_ONLY)
    heldout = _publisher_dir(tmp_path / "heldout", source, HELDOUT, [])
    tiny = ["--corpus", str(corpus), "--test-corpus", str(heldout), "--learners", "2",
            "--nj", "1", "--mono-opts", "--num-iters 10 --total-gauss 200",
            "--tri1-opts", "--num-leaves 150 --total-gauss 300 --num-iters 6 --realign-iters 3",
            "--tri2-opts", "--num-leaves 160 --total-gauss 300 --num-iters 6 --realign-iters 3 "
                           "--mllt-iters 2,4 --dim 20",
            "--train-opts", "--epochs 1 --units 16 --batch-size 16 --heldout-utts 2",
            "--decode-opts", "--beam 10 --lattice-beam 4 --max-active 300 --lmwt 8,10 --wip 0.0",
            "--seq-objectives", "mmi", "--seq-opts", "--epochs 1 --max-steps 3",
            "--denlats-opts", "--beam 8 --lattice-beam 3 --max-active 300"]
    first = run_recipe(tmp_path, *tiny)
    assert first.returncode == 0, first.stderr[-3000:]
    for n in range(9):
        assert re.search(rf"stage {n} \(.*\): done in \d+ s", first.stderr), f"stage {n} missing"
    assert re.search(r"test: 8 clips, .* OOV \d+/\d+ = ", first.stdout + first.stderr)

    exp = tmp_path / "exp"
    results = (exp / "results.md").read_text()
    for system in ("mono", "tri1", "tri2", "blstm_ssgd x2", "blstm_ssgd_mmi x2"):
        for lm in ("tg", "fg"):
            for test_set in ("test", "heldout"):
                assert f"| {system} {lm} {test_set} |" in results, results
    rows = (exp / "RESULTS").read_text().splitlines()
    assert len(rows) == 20
    wer = r"%WER (\d+\.\d+) \[ \d+ / (\d+), \d+ ins, \d+ del, \d+ sub \]"
    words = {"test": None, "heldout": None}
    for row in rows:
        match = re.match(wer, row)
        assert match, row
        test_set = "heldout" if "_heldout" in row else "test"
        assert words[test_set] in (None, match[2])
        words[test_set] = match[2]
    for system in ("mono", "tri2"):
        tg_test = next(r for r in rows if f"{system}/decode_tg_test" in r)
        assert float(re.match(wer, tg_test)[1]) < 100.0, tg_test
    assert (exp / "tri2" / "final.mat").is_file()
    assert (exp / "tri2" / "graph_tg" / "oov.int").is_file()  # mkgraph's: stage 7's old lang

    # after the graphs and decodes below exp/mono and exp/tri1, the GMM stages are still done
    again = run_recipe(tmp_path, *tiny, "--stop-stage", "3")
    assert again.returncode == 0, again.stderr[-3000:]
    skipped = re.findall(r": (\w+) already done with these options and inputs", again.stderr)
    assert sorted(set(skipped)) == ["align_gmm", "features", "ingest_ali", "ljspeech_lm",
                                    "prepare_ljspeech", "train_deltas", "train_lda_mllt"], \
        again.stderr


def test_an_unknown_network_setup_is_one_line_before_any_stage(tmp_path: Path) -> None:
    bad = run_recipe(tmp_path, "--setup", "lstm")
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].endswith(
        "--setup lstm: choose blstm, conformer or tdnnf")
    assert "stage 0" not in bad.stderr and not (tmp_path / "data").exists()
