"""asrdist-ingest-ali as a user runs it: report on stdout, one-line errors, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kaldi_hmm_gmm as khg  # noqa: I001  (must be imported before anything loading kaldifst)
import kaldiio
import numpy as np
import pytest

from asrdist.kaldi.alignments import write_alignments
from asrdist.kaldi.final_mdl import write_final_mdl

EXE = [sys.executable, "-m", "asrdist.cli.ingest_ali"]
TOPO = (
    "<Topology> <TopologyEntry> <ForPhones> 1 2 </ForPhones> "
    "<State> 0 <PdfClass> 0 <Transition> 0 0.5 <Transition> 1 0.5 </State> "
    "<State> 1 <PdfClass> 1 <Transition> 1 0.5 <Transition> 2 0.5 </State> "
    "<State> 2 </State> </TopologyEntry> </Topology>"
)


def make_dirs(root: Path, ali_lengths: dict[str, int], feat_lengths: dict[str, int]) -> Path:
    topo = khg.HmmTopology()
    topo.read(TOPO)
    ctx = khg.monophone_context_dependency(topo.phones, topo.get_phone_to_num_pdf_classes())
    tm = khg.TransitionModel(ctx, topo)
    ali = root / "exp" / "mono"
    ali.mkdir(parents=True)
    write_final_mdl(ali / "final.mdl", tm)
    (ali / "num_jobs").write_text("1\n")
    write_alignments(ali / "ali.1.gz", [(u, np.ones(n, np.int32)) for u, n in ali_lengths.items()])
    data = root / "data"
    data.mkdir()
    feats = {u: np.zeros((n, 2), np.float32) for u, n in feat_lengths.items()}
    kaldiio.save_ark(str(data / "feats.ark"), feats, scp=str(data / "feats.scp"))
    return root


def run(root: Path, *options: str) -> subprocess.CompletedProcess:
    args = [*EXE, *options, "exp/mono", "data/feats.scp", "exp/mono_pdf"]
    return subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=120)


def test_success_prints_report_and_one_frame_mismatch_passes(tmp_path):
    root = make_dirs(tmp_path, {"a": 10, "b": 12}, {"a": 10, "b": 11})
    proc = run(root)
    assert proc.returncode == 0, proc.stderr
    assert "utterances aligned: 2 of 2" in proc.stdout
    assert "{+0: 1, +1: 1}" in proc.stdout
    assert kaldiio.load_scp(str(root / "exp/mono_pdf/pdf.scp"))["b"].shape == (11,)
    out = root / "exp" / "mono_pdf"
    written = (out / "pdf.ark").stat()
    again = run(root)
    assert again.returncode == 0
    assert ("exp/mono_pdf: ingest_ali already done with these options and inputs; skipping "
            "(remove exp/mono_pdf/.ingest_ali.done to redo)") in again.stderr
    assert again.stdout == proc.stdout
    assert (out / "pdf.ark").stat().st_mtime_ns == written.st_mtime_ns


def test_rerun_with_another_option_or_changed_features_redoes(tmp_path):
    root = make_dirs(tmp_path, {"a": 10, "b": 12}, {"a": 10, "b": 11})
    out = root / "exp" / "mono_pdf"
    assert run(root).returncode == 0
    written = (out / "pdf.ark").stat().st_mtime_ns
    other = run(root, "--tolerance", "3")
    assert other.returncode == 0, other.stderr
    assert ("exp/mono_pdf: ingest_ali was done with other options or inputs "
            "(tolerance 2 -> 3); redoing it") in other.stderr
    assert (out / "pdf.ark").stat().st_mtime_ns != written
    assert "skipping" in run(root, "--tolerance", "3").stderr

    kaldiio.save_ark(str(root / "data/feats.ark"), {"a": np.zeros((10, 2), np.float32)},
                     scp=str(root / "data/feats.scp"))  # features of utterance a only
    changed = run(root, "--tolerance", "3")
    assert changed.returncode == 0, changed.stderr
    assert f"input {root / 'data/feats.scp'} changed" in changed.stderr
    assert "utterances aligned: 1 of 1" in changed.stdout


@pytest.mark.parametrize(
    ("ali", "feats", "options", "message"),
    [
        (
            {"a": 10, "b": 20},
            {"a": 10, "b": 11},
            [],
            "utterance b: alignment has 20 frames but features have 11",
        ),
        ({"a": 10}, {"a": 10, "b": 11}, ["--max-missing", "0.4"], "1 of 2 utterances"),
        ({"a": 10}, {"a": 13}, ["--tolerance", "3"], None),
    ],
    ids=["long-mismatch", "too-many-missing", "tolerance-option"],
)
def test_errors_are_one_line_with_nonzero_exit(tmp_path, ali, feats, options, message):
    root = make_dirs(tmp_path, ali, feats)
    proc = run(root, *options)
    if message is None:
        assert proc.returncode == 0, proc.stderr
        return
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0]
    assert "Traceback" not in proc.stderr
    out = root / "exp" / "mono_pdf"
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("final.mdl", b"<Nnet3> something else\n", "exp/mono/final.mdl: not a Kaldi final.mdl"),
        ("ali.1.gz", b"\x1f\x8b\x08\x00broken", "exp/mono/ali.1.gz: truncated or corrupt gzip"),
    ],
    ids=["model", "alignments"],
)
def test_corrupt_inputs_name_the_file(tmp_path, name, content, message):
    root = make_dirs(tmp_path, {"a": 10}, {"a": 10})
    (root / "exp/mono" / name).write_bytes(content)
    proc = run(root)
    assert proc.returncode == 1
    assert message in proc.stderr
    assert not (root / "exp/mono_pdf/.ingest_ali.done").exists()
