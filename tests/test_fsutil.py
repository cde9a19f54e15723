"""Atomic writes leave either the old or the new file, never a partial one."""

import pytest

from asrdist.fsutil import atomic_path, atomic_write, clear_done, is_done, mark_done


def test_atomic_write_replaces_on_success(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with atomic_write(target) as f:
        f.write("new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_atomic_write_keeps_old_content_on_error(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_write(target) as f:
        f.write("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_atomic_path_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "model.bin"
    with pytest.raises(ValueError), atomic_path(target) as tmp:
        tmp.write_bytes(b"partial")
        raise ValueError
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_done_markers(tmp_path):
    assert not is_done(tmp_path, "features")
    mark_done(tmp_path, "features")
    assert is_done(tmp_path, "features")
    clear_done(tmp_path, "features")
    assert not is_done(tmp_path, "features")
