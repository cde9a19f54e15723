"""Outputs never follow a symbolic link planted in an output dir: a lock file there is
refused in one line naming it, an output written as temp file + rename replaces the link; the
file the link points to is never touched."""

from __future__ import annotations

import os

import kaldiio
import pytest

from asrdist.errors import AsrdistError
from asrdist.fsutil import copy_file, open_fd, open_output
from asrdist.kaldi.ark_writer import ark_writer
from asrdist.testing.planted import (
    loglikes_with_planted_ark,
    plant_link,
    train_with_planted_lock,
)


def test_a_planted_lock_link_is_refused_and_its_target_kept(tmp_path):
    result, link, victim = train_with_planted_lock(tmp_path)
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines() == [
        f"Error: {link}: refused: a symbolic link (to {victim}) where asrdist writes a file "
        "of its own; remove it"]
    assert victim.read_text() == "precious\n"
    assert not (link.parent / "checkpoints").exists()  # nothing trained


def test_a_planted_loglikes_ark_link_is_replaced_and_its_target_kept(tmp_path):
    result, link, victim = loglikes_with_planted_ark(tmp_path)
    assert result.exit_code == 0, result.output
    assert victim.read_text() == "precious\n"
    assert link.is_file() and not link.is_symlink()
    scores = dict(kaldiio.load_scp(str(link.parent / "loglikes.scp")))
    assert scores and all(m.ndim == 2 for m in scores.values())
    assert sorted(p.name for p in victim.parent.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("opener", [
    lambda path: os.close(open_fd(path, os.O_RDWR | os.O_CREAT)),
    lambda path: open_output(path, "a").close(),
    lambda path: ark_writer(path, path.with_suffix(".scp")).__enter__(),
])
def test_in_place_writers_refuse_a_link_in_one_line(tmp_path, opener):
    link, victim = tmp_path / "out" / "x.ark", tmp_path / "victim"
    plant_link(link, victim)
    with pytest.raises(AsrdistError, match=rf"^{link}: refused: a symbolic link \(to {victim}\)"):
        opener(link)
    assert victim.read_text() == "precious\n"


def test_a_dangling_planted_link_is_refused_not_created_through(tmp_path):
    link, victim = tmp_path / "metrics.jsonl", tmp_path / "elsewhere"
    link.symlink_to(victim)
    with pytest.raises(AsrdistError, match="refused: a symbolic link"):
        open_output(link, "a")
    assert not victim.exists()


def test_copy_file_replaces_a_link_at_its_destination(tmp_path):
    link, victim = tmp_path / "out" / "words.txt", tmp_path / "victim"
    plant_link(link, victim)
    (tmp_path / "src").write_text("new\n")
    copy_file(tmp_path / "src", link)
    assert link.read_text() == "new\n" and not link.is_symlink()
    assert victim.read_text() == "precious\n"


def test_open_output_writes_a_new_file_named_as_given(tmp_path):
    path = tmp_path / "new.txt"
    with open_output(path, "w") as f:
        f.write("ok\n")
        assert f.name == str(path)
    assert path.read_text() == "ok\n"
