from __future__ import annotations

import logging
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import soundfile
from click.testing import CliRunner

from asrdist.cli.features import main
from asrdist.kaldi.data_dir import Utterance, read_table, write_data_dir


@pytest.fixture
def cli_feat_src(tmp_path: Path) -> Path:
    """Two speakers, two utterances each, of noise at 16 kHz."""
    rng = np.random.default_rng(0)
    utts = []
    for i, n in enumerate([4000, 7000, 9000, 12345]):
        spk = f"s{i // 2}"
        wav = tmp_path / f"{spk}-{i}.wav"
        soundfile.write(wav, (rng.standard_normal(n) * 2000).astype(np.int16), 16000, "PCM_16")
        utts.append(Utterance(f"{spk}-{i}", spk, "a b", str(wav)))
    write_data_dir(tmp_path / "src", utts)
    return tmp_path / "src"


@pytest.mark.parametrize("kind,dim,nj", [("fbank", 40, "2"), ("mfcc", 13, "1")])
def test_cli_writes_readable_features(
    cli_feat_src: Path, tmp_path: Path, kind: str, dim: int, nj: str, caplog
):
    caplog.set_level(logging.INFO)
    dest = tmp_path / kind
    result = CliRunner().invoke(main, ["--kind", kind, "--nj", nj, str(cli_feat_src), str(dest)])
    assert result.exit_code == 0, result.output
    assert "4 utterances" in result.output and f"dim {dim}" in result.output
    feats = dict(kaldiio.load_scp(str(dest / "feats.scp")))
    lengths = {"s0-0": 4000, "s0-1": 7000, "s1-2": 9000, "s1-3": 12345}
    assert {u: f.shape for u, f in feats.items()} == {
        u: (1 + (n - 400) // 160, dim) for u, n in lengths.items()}
    assert set(kaldiio.load_scp(str(dest / "cmvn.scp"))) == {"s0", "s1"}
    arks = {p: p.stat().st_mtime_ns for p in dest.glob("data/*.ark")}
    again = CliRunner().invoke(main, ["--kind", kind, str(cli_feat_src), str(dest)])  # --nj 1
    assert again.exit_code == 0 and "4 utterances" in again.output
    assert (f"{dest}: features already done with these options and inputs; skipping "
            f"(remove {dest / '.features.done'} to redo)") in caplog.text
    assert {p: p.stat().st_mtime_ns for p in dest.glob("data/*.ark")} == arks


def test_missing_wav_is_named(cli_feat_src: Path, tmp_path: Path):
    wav = Path(read_table(cli_feat_src / "wav.scp")["s1-2"])
    wav.unlink()
    result = CliRunner().invoke(main, ["--kind", "mfcc", str(cli_feat_src), str(tmp_path / "o")])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1  # one line naming both the utterance and the file
    assert "utterance s1-2: cannot read audio" in errors[0] and str(wav) in errors[0]


def test_not_a_data_dir(tmp_path: Path):
    (tmp_path / "src").mkdir()
    result = CliRunner().invoke(main, [str(tmp_path / "src"), str(tmp_path / "o")])
    assert result.exit_code == 1 and "missing wav.scp" in result.output


def test_rerun_with_other_options_recomputes(cli_feat_src: Path, tmp_path: Path, caplog):
    caplog.set_level(logging.INFO)
    dest = tmp_path / "feats"
    assert CliRunner().invoke(main, [str(cli_feat_src), str(dest)]).exit_code == 0
    result = CliRunner().invoke(main, ["--kind", "mfcc", str(cli_feat_src), str(dest)])
    assert result.exit_code == 0, result.output
    assert "dim 13" in result.output
    assert (f'{dest}: features was done with other options or inputs (kind "fbank" -> "mfcc"; '
            "num_mel_bins 40 -> 23); redoing it") in caplog.messages
    assert next(iter(kaldiio.load_scp(str(dest / "feats.scp")).values())).shape[1] == 13


def test_changed_src_table_recomputes(cli_feat_src: Path, tmp_path: Path, caplog):
    caplog.set_level(logging.INFO)
    dest = tmp_path / "feats"
    assert CliRunner().invoke(main, [str(cli_feat_src), str(dest)]).exit_code == 0
    lines = (cli_feat_src / "wav.scp").read_text().splitlines()
    (cli_feat_src / "wav.scp").write_text("\n".join(lines[:3]) + "\n")  # one utterance less
    text = (cli_feat_src / "text").read_text().splitlines()
    (cli_feat_src / "text").write_text("\n".join(text[:3]) + "\n")  # as fix_data_dir.sh would
    result = CliRunner().invoke(main, [str(cli_feat_src), str(dest)])
    assert result.exit_code == 0, result.output
    assert f"input {cli_feat_src / 'wav.scp'} changed" in caplog.text
    assert len(kaldiio.load_scp(str(dest / "feats.scp"))) == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [(["--nj", "0"], "--nj must be at least 1, got 0"),
     (["--kind", "plp"], "Invalid value for '--kind'")],
    ids=["nj", "kind"],
)
def test_bad_options_are_refused(cli_feat_src: Path, tmp_path: Path, options, message):
    result = CliRunner().invoke(main, [*options, str(cli_feat_src), str(tmp_path / "o")])
    assert result.exit_code != 0 and message in result.output
    assert not (tmp_path / "o" / "feats.scp").exists()


def test_src_as_dest_is_refused(cli_feat_src: Path):
    result = CliRunner().invoke(main, [str(cli_feat_src), str(cli_feat_src)])
    assert result.exit_code == 1 and "SRC and DEST are the same directory" in result.output


@pytest.mark.parametrize("fault", ["latin-1 text", "text utterance not in wav.scp"])
def test_bad_tables_are_one_line_errors_before_any_feature_is_computed(
        cli_feat_src: Path, tmp_path: Path, fault: str):
    text = cli_feat_src / "text"
    if fault == "latin-1 text":
        text.write_bytes(text.read_bytes().replace(b"a b", "caf\xe9".encode("latin-1"), 1))
        message = f"Error: {text}:1: not UTF-8 text"
    else:
        text.write_text(text.read_text() + "s9-9 a b\n")
        message = f"Error: {text}: utterance s9-9 is not in wav.scp"
    dest = tmp_path / "fbank"
    result = CliRunner().invoke(main, [str(cli_feat_src), str(dest)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1].startswith(message), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not list(dest.glob("data/*.ark")) and not (dest / "feats.scp").exists()
