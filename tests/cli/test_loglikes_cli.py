"""A decoding sweep from kept network scores: the network runs once, decoding as often as asked."""

from __future__ import annotations

import pytest

from asrdist.decode.graph import make_graph
from tests.cli_process import run_cli
from tests.decode.tiny_system import make_system, write_identity_nnet, write_test_data

SENTENCES = {"v1-u1": "dog sit on cat", "v1-u2": "cat sat", "v2-u3": "sit", "v2-u4": "dog sat"}


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    sys_ = make_system(tmp_path_factory.mktemp("loglikes") / "sys")
    make_graph(sys_.lang, sys_.mono / "final.mdl", sys_.train_text, sys_.root / "graph")
    write_test_data(sys_, sys_.root / "test_fbank", SENTENCES, "nnet")
    write_identity_nnet(sys_, sys_.root / "final.pt")
    return sys_


def test_sweep_from_kept_loglikes_equals_decoding_with_the_model(system):
    root, data = system.root, str(system.root / "test_fbank")
    kept = run_cli("compute_loglikes", "--model", str(root / "final.pt"), "--data", data,
                "--out", str(root / "post"))
    assert kept.returncode == 0, kept.stderr
    sweep = ("--lmwt", "5 10", "--wip", "0.0 0.5", "--graph", str(root / "graph"),
             "--data", data)
    direct = run_cli("decode", *sweep, "--model", str(root / "final.pt"), "--out",
                  str(root / "dec_model"))
    (root / "final.pt").rename(root / "moved.pt")  # the kept scores must not need the network
    try:
        saved = run_cli("decode", *sweep, "--loglikes", str(root / "post" / "loglikes.scp"),
                     "--trans-mdl", str(system.mono / "final.mdl"), "--out",
                     str(root / "dec_kept"))
    finally:
        (root / "moved.pt").rename(root / "final.pt")
    assert direct.returncode == 0 and saved.returncode == 0, direct.stderr + saved.stderr
    for name in ("text", "ctm", "score_5_0.5/text", "score_10_0.0/ctm"):
        assert (root / "dec_kept" / name).read_text() == (root / "dec_model" / name).read_text()
    ctm = (root / "dec_kept" / "score_10_0.0" / "ctm").read_text().split()
    assert ctm[:2] == ["v1-u1", "1"] and ctm[4] == "dog"


def test_missing_loglikes_is_one_line_error(system, tmp_path):
    proc = run_cli("decode", "--graph", str(system.root / "graph"), "--loglikes",
                str(tmp_path / "none.scp"), "--data", str(system.root / "test_fbank"),
                "--trans-mdl", str(system.mono / "final.mdl"), "--out", str(tmp_path / "d"))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("Error: --loglikes ")
