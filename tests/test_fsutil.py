"""Atomic writes leave either the old or the new file, never a partial one; a stage is done
only with the options and inputs its marker records (asrdist.stage)."""

import json
import logging
import os

import pytest

from asrdist import stage
from asrdist.errors import AsrdistError
from asrdist.fsutil import (
    atomic_path,
    atomic_write,
    clear_done,
    done_marker,
    is_done,
    mark_done,
    write_atomically,
)
from asrdist.stage import check_done


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


# ---- asrdist.stage: one rule for "this stage is done" --------------------------------------


def _inputs(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "text").write_text("u1 a b\n")
    (src / "sub" / "big.ark").write_bytes(b"x" * 100)
    (src / ".text.abc.tmp").write_text("half-written")
    return src


def test_stage_is_done_with_the_same_options_and_inputs(tmp_path, caplog):
    caplog.set_level(logging.INFO, "asrdist.stage")
    src, out = _inputs(tmp_path), tmp_path / "out"
    first = check_done(out, "features", {"kind": "fbank", "dims": (40, 3)}, [src])
    assert not first.done and first.changes == () and not caplog.records
    out.mkdir()
    first.mark_done()
    record = json.loads(done_marker(out, "features").read_text())
    assert record["options"] == {"dims": [40, 3], "kind": "fbank"}
    assert sorted(record["inputs"]) == [str(src / "sub" / "big.ark"), str(src / "text")]

    again = check_done(out, "features", {"kind": "fbank", "dims": (40, 3)}, [src])
    assert again.done
    assert caplog.messages == [
        f"{out}: features already done with these options and inputs; skipping "
        f"(remove {out / '.features.done'} to redo); compared 2 options and 2 input files "
        "(2 by content, 0 by size and mtime)"]
    (src / ".text.def.tmp").write_text("another temp file")  # hidden: not an input
    assert check_done(out, "features", {"kind": "fbank", "dims": (40, 3)}, [src]).done


def test_changed_options_or_inputs_are_named_and_the_marker_cleared(tmp_path, caplog):
    caplog.set_level(logging.INFO, "asrdist.stage")
    src, out = _inputs(tmp_path), tmp_path / "out"
    out.mkdir()
    check_done(out, "features", {"kind": "fbank", "nj": 1}, [src]).mark_done()

    other = check_done(out, "features", {"kind": "mfcc"}, [src])
    assert not other.done and other.marker_mtime_ns is not None
    assert other.changes == ('kind "fbank" -> "mfcc"', 'nj 1 -> "<unset>"')
    assert caplog.messages[-1] == (
        f'{out}: features was done with other options or inputs (kind "fbank" -> "mfcc"; '
        f'nj 1 -> "<unset>"); redoing it')
    assert not done_marker(out, "features").exists()  # cleared before the work is redone

    check_done(out, "features", {"kind": "mfcc"}, [src]).mark_done()
    (src / "text").write_text("u1 a c\n")  # same size, other content
    changed = check_done(out, "features", {"kind": "mfcc"}, [src], clear=False)
    assert changed.changes == (f"input {src / 'text'} changed",)
    assert done_marker(out, "features").exists()  # clear=False keeps it


def test_small_files_compare_by_content_large_ones_by_mtime(tmp_path, monkeypatch):
    src, out = _inputs(tmp_path), tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(stage, "HASHED_BELOW", 50)  # text is hashed, big.ark is not
    check_done(out, "s", {}, [src]).mark_done()
    os.utime(src / "text", ns=(1, 1))  # rewritten with the same content
    assert check_done(out, "s", {}, [src]).done
    st = (src / "sub" / "big.ark").stat()
    os.utime(src / "sub" / "big.ark", ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
    assert check_done(out, "s", {}, [src]).changes == (f"input {src / 'sub' / 'big.ark'} changed",)


def test_new_gone_and_dropped_inputs_and_recorded_outputs(tmp_path):
    src, out = _inputs(tmp_path), tmp_path / "out"
    out.mkdir()
    (out / "final.pt").write_text("model")
    check_done(out, "train", {}, [src / "text", tmp_path / "missing"]).mark_done(["final.pt"])
    (tmp_path / "missing").write_text("now here")
    (src / "text").unlink()
    assert check_done(out, "train", {}, [src / "text", tmp_path / "missing"],
                      clear=False).changes == (f"new input {tmp_path / 'missing'}",
                                               f"input {src / 'text'} gone")
    assert check_done(out, "train", {}, [], clear=False).changes == (
        f"{tmp_path / 'missing'} no longer an input", f"{src / 'text'} no longer an input")
    (out / "final.pt").unlink()
    assert check_done(out, "train", {}, [src / "text", tmp_path / "missing"],
                      clear=False).changes[-1] == f"output {out / 'final.pt'} changed or gone"


def test_an_unset_input_is_left_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("x")
    assert stage.describe_files(["", tmp_path / "none"]) == {str(tmp_path / "none"): None}


def test_a_marker_without_fingerprint_is_redone(tmp_path):
    mark_done(tmp_path, "decode")  # a marker of an older asrdist: "done\n"
    check = check_done(tmp_path, "decode", {})
    assert not check.done and check.changes == ("no fingerprint recorded",)
    assert not is_done(tmp_path, "decode")


def test_write_atomically_names_the_file_on_a_write_error_and_leaves_nothing(tmp_path):
    path = tmp_path / "final.pt"

    def full_disk(f) -> None:
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(AsrdistError, match=f"^{path}: cannot write the final model: No space"):
        write_atomically(path, full_disk, "final model")
    assert list(tmp_path.iterdir()) == []
    write_atomically(path, lambda f: f.write(b"whole"), "final model")
    assert path.read_bytes() == b"whole"


def test_a_done_stage_is_skipped_with_the_one_result_type(tmp_path):
    check_done(tmp_path, "decode", {"beam": 13}).mark_done()
    again = check_done(tmp_path, "decode", {"beam": 13})
    assert again.done and again.skipped() == stage.Skipped(tmp_path, "decode")


def test_an_input_missing_then_and_now_is_no_change(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    check_done(out, "s", {}, [tmp_path / "never"]).mark_done()
    assert check_done(out, "s", {}, [tmp_path / "never"]).done
