"""Kept scores as Kaldi compressed matrices: what Kaldi reads from them, and how far from the
float32 scores they are."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import kaldiio
import numpy as np
import pytest

from asrdist.decode.loglikes import COMPRESSION
from asrdist.devices import torch_device
from asrdist.errors import AsrdistError

EXPECTED = Path(__file__).parent / "kaldi_expected" / "compressed"
sys.path.insert(0, str(EXPECTED))
from make_scores import scores  # noqa: E402


def kaldi_text(path: Path) -> dict[str, np.ndarray]:
    """Kaldi's ``ark,t`` matrices (copy-matrix's output) by utterance."""
    out: dict[str, np.ndarray] = {}
    for block in path.read_text().split("]"):
        if "[" in block:
            name, _, body = block.partition("[")
            out[name.split()[0]] = np.array([[float(v) for v in row.split()]
                                             for row in body.strip().splitlines()])
    return out


def test_our_compressed_scores_are_the_bytes_kaldi_read():
    """The ark written now is the one Kaldi's copy-matrix read (kaldi_read.txt), and kaldiio
    decompresses it to Kaldi's values (to the 7 digits Kaldi prints)."""
    buf = io.BytesIO()
    for name in ("2byte", "1byte"):
        kaldiio.save_ark(buf, {f"utt-{name}": scores()}, compression_method=COMPRESSION[name])
    assert buf.getvalue() == (EXPECTED / "scores.ark").read_bytes()
    kaldi = kaldi_text(EXPECTED / "kaldi_read.txt")
    ours = dict(kaldiio.load_ark(str(EXPECTED / "scores.ark")))
    assert sorted(ours) == sorted(kaldi) == ["utt-1byte", "utt-2byte"]
    for utt, mat in ours.items():
        np.testing.assert_allclose(mat, kaldi[utt], rtol=2e-6, atol=1e-5)


def test_compression_errors_are_within_what_the_option_promises():
    """2byte: at most range / 131070 off (one step of 65535 over the range, rounded);
    1byte: at most 1 % of each pdf's range on these scores."""
    exact = scores()
    kaldi = kaldi_text(EXPECTED / "kaldi_read.txt")
    two = np.abs(kaldi["utt-2byte"] - exact).max()
    assert two <= (exact.max() - exact.min()) / 131070 + 1e-5
    one = np.abs(kaldi["utt-1byte"] - exact).max(axis=0)
    assert (one <= 0.01 * (exact.max(axis=0) - exact.min(axis=0)) + 1e-5).all()
    assert two < one.max()  # else the smaller file would be the better one


def test_a_device_without_cuda_is_a_one_line_error(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(AsrdistError, match=r"^--device cuda: no CUDA device is available$"):
        torch_device("cuda")
    with pytest.raises(AsrdistError, match="not a device"):
        torch_device("tpu")
    assert torch_device("cpu").type == "cpu"


def test_compute_loglikes_refuses_an_unknown_compression(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "asrdist.cli.compute_loglikes", "--model",
                           str(tmp_path / "final.pt"), "--data", str(tmp_path), "--out",
                           str(tmp_path / "out"), "--compress", "4bit"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "--compress" in proc.stderr


def test_a_cuda_index_beyond_the_machine_s_devices_is_one_line(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)
    with pytest.raises(AsrdistError, match=r"^--device cuda:2: this machine has 2 CUDA "
                                           r"device\(s\)$"):
        torch_device("cuda:2")
