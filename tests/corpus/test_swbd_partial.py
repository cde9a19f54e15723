"""A partial LDC tree does not pass silently: symlinked discs are entered (as check_paths.sh's
``find -L``), conversations without audio are named, and the releases' sizes that Kaldi's
scripts check stop a partial corpus unless it is allowed."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

import pytest

from asrdist.corpus.swbd import eval2000, find, fisher, switchboard, walk_files
from asrdist.errors import AsrdistError
from tests.cli_process import run_cli
from tests.corpus.ldc_fixture import make_ldc_tree


@pytest.fixture(scope="module")
def ldc(tmp_path_factory):
    return make_ldc_tree(tmp_path_factory.mktemp("ldc"))


def test_symlinked_discs_are_entered_as_find_L_enters_them(ldc, tmp_path):
    root = tmp_path / "LDC97S62"
    root.mkdir()
    (root / "swb1_d1").symlink_to(ldc.swbd_audio / "swb1_d1", target_is_directory=True)
    (root / "again").symlink_to(ldc.swbd_audio / "swb1_d1", target_is_directory=True)
    (root / "loop").symlink_to(root, target_is_directory=True)  # a loop: walked once
    ours = {p.name for p in find(root, r"sw0\d{4}\.sph", "--swbd-audio", "sph")}
    assert ours == {"sw02001.sph", "sw02005.sph"}
    assert not list(root.rglob("*.sph"))  # what Path.rglob saw (Python 3.11)
    kaldi = subprocess.run(["find", "-L", str(root), "-iname", "sw0*.sph"], capture_output=True,
                           text=True, check=False).stdout.split()
    assert {os.path.basename(p) for p in kaldi} == ours
    assert len(list(walk_files(root))) == 2  # each real folder once


def test_partial_corpus_stops_with_the_counts(ldc):
    with pytest.raises(AsrdistError, match=r"2 sw0NNNN.sph files under it; Kaldi's "
                       r"swbd1_data_prep.sh expects 2435 or 2438 .*--allow-partial"):
        switchboard(ldc.swbd_audio, ldc.ms98)
    with pytest.raises(AsrdistError, match=r"4 conversation sides .*eval2000_data_prep.sh "
                       r"expects 80 "):
        eval2000(ldc.eval2000_audio, ldc.eval2000_ref)
    with pytest.raises(AsrdistError, match=r"fe_03_NNNNN.txt transcripts; Kaldi's "
                       r"fisher_data_prep.sh expects 11699 "):
        fisher([str(ldc.fisher_audio)], [str(ldc.fisher_text)])


def test_allow_partial_goes_on_and_says_so(ldc, caplog):
    with caplog.at_level(logging.WARNING):
        swbd = switchboard(ldc.swbd_audio, ldc.ms98, allow_partial=True)
    assert swbd.segments
    assert any("going on with a partial corpus (--allow-partial)" in r.getMessage()
               for r in caplog.records)


def test_conversations_without_audio_are_named(ldc, tmp_path, caplog):
    audio = tmp_path / "audio"
    shutil.copytree(ldc.swbd_audio, audio)
    (audio / "swb1_d1" / "data" / "sw02005.sph").unlink()
    with caplog.at_level(logging.WARNING):
        swbd = switchboard(audio, ldc.ms98, allow_partial=True)
    assert {s.reco for s in swbd.segments} == {"sw02001-A", "sw02001-B"}
    lines = [r.getMessage() for r in caplog.records if "have no audio" in r.getMessage()]
    assert len(lines) == 1
    assert "1 of 2 transcribed conversations have no audio" in lines[0]
    assert lines[0].endswith(": sw02005")


def test_cli_option_allows_a_partial_corpus(ldc, tmp_path):
    args = ["--swbd-audio", ldc.swbd_audio, "--ms98", ldc.ms98, "--eval2000-audio",
            ldc.eval2000_audio, "--eval2000-ref", ldc.eval2000_ref, "--dev-utts", "4",
            "--out", tmp_path / "data"]
    proc = run_cli("prepare_swbd", *args)
    assert proc.returncode == 1 and "--allow-partial" in proc.stderr
    proc = run_cli("prepare_swbd", *args, "--allow-partial")
    assert proc.returncode == 0, proc.stderr
