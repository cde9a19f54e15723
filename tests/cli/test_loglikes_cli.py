"""A decoding sweep from kept network scores: the network runs once, decoding as often as asked."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from click.testing import CliRunner

from asrdist.cli.compute_loglikes import main
from asrdist.cli.decode import main as decode_main
from asrdist.decode import loglikes
from asrdist.decode.graph import make_graph
from asrdist.testing.planted import invoke
from asrdist.testing.resampled import trained_model, with_sample_rate
from asrdist.testing.tiny_system import make_system, write_identity_nnet, write_test_data
from tests.cli_process import run_cli

SENTENCES = {"v1-u1": "dog sit on cat", "v1-u2": "cat sat", "v2-u3": "sit", "v2-u4": "dog sat"}


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    sys_ = make_system(tmp_path_factory.mktemp("loglikes") / "sys")
    make_graph(sys_.lang, sys_.mono / "final.mdl", sys_.train_text, sys_.root / "graph")
    write_test_data(sys_, sys_.root / "test_fbank", SENTENCES, "nnet")
    write_identity_nnet(sys_, sys_.root / "final.pt")
    return sys_


@pytest.mark.parametrize("compress", ["none", "2byte"])
def test_sweep_from_kept_loglikes_equals_decoding_with_the_model(system, compress):
    """Float32 scores decode exactly as the network does; 2-byte compressed ones (errors of
    about 1e-3 nats) to the same words and times on this system."""
    root, data = system.root, str(system.root / "test_fbank")
    post = root / f"post_{compress}"
    kept = run_cli("compute_loglikes", "--model", str(root / "final.pt"), "--data", data,
                   "--out", str(post), "--compress", compress)
    assert kept.returncode == 0, kept.stderr
    sweep = ("--lmwt", "5 10", "--wip", "0.0 0.5", "--graph", str(root / "graph"),
             "--data", data)
    direct = run_cli("decode", *sweep, "--model", str(root / "final.pt"), "--out",
                     str(root / "dec_model"))
    (root / "final.pt").rename(root / "moved.pt")  # the kept scores must not need the network
    try:
        saved = run_cli("decode", *sweep, "--loglikes", str(post / "loglikes.scp"),
                        "--trans-mdl", str(system.mono / "final.mdl"), "--out",
                        str(root / f"dec_kept_{compress}"))
    finally:
        (root / "moved.pt").rename(root / "final.pt")
    assert direct.returncode == 0 and saved.returncode == 0, direct.stderr + saved.stderr
    kept_dir = root / f"dec_kept_{compress}"
    for name in ("text", "ctm", "score_5_0.5/text", "score_10_0.0/ctm"):
        assert (kept_dir / name).read_text() == (root / "dec_model" / name).read_text()
    ctm = (kept_dir / "score_10_0.0" / "ctm").read_text().split()
    assert ctm[:2] == ["v1-u1", "1"] and ctm[4] == "dog"


def test_missing_loglikes_is_one_line_error(system, tmp_path):
    proc = run_cli("decode", "--graph", str(system.root / "graph"), "--loglikes",
                str(tmp_path / "none.scp"), "--data", str(system.root / "test_fbank"),
                "--trans-mdl", str(system.mono / "final.mdl"), "--out", str(tmp_path / "d"))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("Error: --loglikes ")


def test_full_disk_names_the_scores_file(system, tmp_path, monkeypatch):
    """A write's OSError names no file: the one-line error names the job and the file that met
    the full disk, and no hidden temporary ark (nor part of one) stays behind."""

    class FullDisk:
        def __init__(self, spec: str, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            pass

        def __call__(self, utt: str, scores) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(loglikes.kaldiio, "WriteHelper", FullDisk)
    out = tmp_path / "post"
    result = CliRunner().invoke(main, ["--model", str(system.root / "final.pt"), "--data",
                                       str(system.root / "test_fbank"), "--out", str(out)])
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        f"Error: loglikes job 1/1: {(out / 'loglikes.ark').resolve()}: cannot write the scores: "
        "No space left on device")
    assert sorted(p.name for p in out.iterdir()) == []


def test_a_killed_run_s_temporary_ark_is_removed_by_the_next(system, tmp_path):
    """A killed run leaves its hidden temporary ark (as large as the scores); the next run,
    a skipped one too, removes it and says so."""
    out = tmp_path / "post"
    args = ("--model", str(system.root / "final.pt"), "--data", str(system.root / "test_fbank"),
            "--out", str(out))
    out.mkdir()
    stale = [out / ".loglikes.ark.x1y2z3.tmp", out / ".loglikes.scp.x1y2z3.tmp"]
    for path in stale:
        path.write_bytes(b"\0" * 4096)
    first = run_cli("compute_loglikes", *args)
    assert first.returncode == 0, first.stderr
    assert f"{stale[0]}: removing the temporary file a killed run left" in first.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        ".loglikes.done", "loglikes.ark", "loglikes.scp", "num_pdfs"]
    stale[0].write_bytes(b"\0" * 4096)
    again = run_cli("compute_loglikes", *args)
    assert again.returncode == 0, again.stderr
    assert "already done" in again.stderr and not stale[0].exists()


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``root``, hidden ones too: its (size, mtime_ns)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*")}


def test_jobs_give_one_job_s_bytes_and_a_skipped_rerun_writes_nothing(system, tmp_path):
    """--nj 2 under run.pl writes the ark, scp and num_pdfs that --nj 1 writes (the scp naming
    its own ark); run again it is skipped writing nothing, so the decode from it stays done."""
    root = system.root
    args = ("--model", str(root / "final.pt"), "--data", str(root / "test_fbank"))
    for nj in ("1", "2"):
        proc = run_cli("compute_loglikes", *args, "--nj", nj, "--cmd", "run.pl",
                       "--out", str(tmp_path / f"nj{nj}"))
        assert proc.returncode == 0, proc.stderr
    one, two = tmp_path / "nj1", tmp_path / "nj2"
    assert (two / "loglikes.ark").read_bytes() == (one / "loglikes.ark").read_bytes()
    assert (two / "num_pdfs").read_bytes() == (one / "num_pdfs").read_bytes()
    assert (two / "loglikes.scp").read_text() == (one / "loglikes.scp").read_text().replace(
        str(one.resolve()), str(two.resolve()))
    assert sorted(p.name for p in two.iterdir()) == [
        ".loglikes.done", "loglikes.ark", "loglikes.scp", "num_pdfs"]  # no part left over

    decode = ("decode", "--graph", str(root / "graph"), "--loglikes",
              str(two / "loglikes.scp"), "--trans-mdl", str(system.mono / "final.mdl"),
              "--data", str(root / "test_fbank"), "--out", str(tmp_path / "dec"))
    assert run_cli(*decode).returncode == 0
    before = tree(two)
    again = run_cli("compute_loglikes", *args, "--nj", "3", "--out", str(two))
    assert again.returncode == 0 and "already done" in again.stderr, again.stderr
    assert tree(two) == before
    redecode = run_cli(*decode)
    assert redecode.returncode == 0 and "decode already done" in redecode.stderr, redecode.stderr


def test_features_made_otherwise_are_refused_naming_model_and_features(tmp_path):
    """A model trained on 16 kHz features given a dir of 8 kHz ones (the same dimension):
    one line naming the features' record and the model, and no scores; its own features
    are scored."""
    final, data = trained_model(tmp_path)
    other = with_sample_rate(data, tmp_path / "data_8k", 8000)
    refused = invoke(main, "--model", final, "--data", other, "--out", tmp_path / "post")
    assert refused.exit_code == 1
    assert refused.output.strip().splitlines() == [
        f"Error: {other / 'feats_config.json'}: these features do not match those {final} was "
        "trained on: sampling_rate 8000 (the model's 16000); make them with the training "
        "features' options"]
    assert not (tmp_path / "post" / "loglikes.scp").exists()
    scored = invoke(main, "--model", final, "--data", data, "--out", tmp_path / "post")
    assert scored.exit_code == 0, scored.output
    assert (tmp_path / "post" / "loglikes.scp").is_file()


def _kept_scores(system, out: Path) -> Path:
    """asrdist-compute-loglikes of the tiny system's test set into ``out``: its loglikes.scp."""
    result = CliRunner().invoke(main, ["--model", str(system.root / "final.pt"), "--data",
                                       str(system.root / "test_fbank"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "loglikes.scp"


def _decode_kept(system, scp: Path, out: Path):
    return CliRunner().invoke(decode_main, [
        "--graph", str(system.root / "graph"), "--loglikes", str(scp), "--data",
        str(system.root / "test_fbank"), "--trans-mdl", str(system.mono / "final.mdl"),
        "--out", str(out)])


def test_an_utterance_twice_in_loglikes_scp_is_refused_naming_both(system, tmp_path):
    """kaldiio keeps an id's last entry: the second utterance's words were written for the
    first, exit 0."""
    scp = _kept_scores(system, tmp_path / "post")
    lines = scp.read_text().splitlines()
    second = lines[1].split()[1]
    scp.write_text("\n".join([*lines, f"{lines[0].split()[0]} {second}"]) + "\n")
    result = _decode_kept(system, scp, tmp_path / "dec")
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == (
        f"Error: {scp}:{len(lines) + 1}: duplicate key {lines[0].split()[0]}")
    assert not (tmp_path / "dec" / "text").exists()


def test_a_loglikes_ark_cut_mid_matrix_is_one_line_naming_it_and_the_utterance(system,
                                                                              tmp_path):
    scp = _kept_scores(system, tmp_path / "post")
    ark = scp.with_name("loglikes.ark")
    last = scp.read_text().splitlines()[-1].split()[0]
    ark.write_bytes(ark.read_bytes()[:-40])
    result = _decode_kept(system, scp, tmp_path / "dec")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith(f"Error: decode job 1/1: --loglikes {scp}: utterance {last}: "
                                f"cannot read its scores from {ark}:"), result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "dec" / "text").exists()
