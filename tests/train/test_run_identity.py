"""A run is what its inputs are: respelled or touched-but-unchanged inputs skip, a finished
run is never deleted unasked, a batch change on resume keeps the data position, and
checkpoints carry a format version."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import torch

from asrdist import stage
from asrdist.errors import AsrdistError
from asrdist.parallel.strategy import Single
from asrdist.stage import Skipped
from asrdist.testing import make_corpus
from asrdist.train.checkpoint import FORMAT, checkpoint_dir, list_checkpoints
from asrdist.train.metrics import read_metrics
from asrdist.train.trainer import train
from tests.train.corpus import train_config

TINY = dict(layers=1, units=8, chunk_len=10, batch_size=8, shuffle_buffer=32, heldout_utts=2,
            log_every=1, lr=0.5, lr_ref_batch=8, epochs=1)


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus")


def _train(corpus, out: Path, **kw):
    return train(train_config(corpus, out, TINY, **kw), Single())


def _finished(corpus, out: Path) -> bytes:
    assert not isinstance(_train(corpus, out, checkpoint_every=3), Skipped)
    return (out / "final.pt").read_bytes()


def test_every_spelling_of_the_inputs_is_the_same_run(corpus, tmp_path, monkeypatch):
    out = tmp_path / "run"
    model = _finished(corpus, out)
    data, targets = corpus
    link = tmp_path / "data_link"
    link.symlink_to(data)
    monkeypatch.chdir(data.parent)
    for spelled in (f"{data}/", "./data", f"{data}/../data", str(link)):
        assert isinstance(train(train_config((Path(spelled), targets), out, TINY), Single()),
                          Skipped), spelled
    assert (out / "final.pt").read_bytes() == model


def test_a_touched_but_unchanged_ark_is_no_change_and_a_changed_one_is(corpus, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(stage, "HASHED_BELOW", 0)  # every input a "large" one: by mtime
    out = tmp_path / "run"
    model = _finished(corpus, out)
    ark = next(corpus[0].glob("*.ark"))
    st = ark.stat()
    os.utime(ark, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # `touch`, or cp without -t
    assert isinstance(_train(corpus, out), Skipped)
    content = bytearray(ark.read_bytes())
    content[-1] ^= 0x01  # same size, other bytes
    ark.write_bytes(bytes(content))
    assert not isinstance(_train(corpus, out), Skipped)
    moved = list((out / "superseded").glob("*/final.pt"))
    assert len(moved) == 1 and moved[0].read_bytes() == model


def test_resume_on_a_finished_run_with_another_option_is_refused_and_touches_nothing(
        corpus, tmp_path):
    out = tmp_path / "run"
    model = _finished(corpus, out)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    with pytest.raises(AsrdistError, match=r"--resume: .* holds a finished run done with "
                                           r"other options or inputs \(lr 0\.5 -> 0\.25\); "
                                           r"left as it is"):
        _train(corpus, out, lr=0.25, resume=True)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert (out / "final.pt").read_bytes() == model


class _CrashAt(Single):
    """Plain SGD that dies after step ``step``: an interrupted run."""

    def __init__(self, step: int) -> None:
        self.step = step

    def after_step(self, model, step):
        if step == self.step:
            raise RuntimeError("killed")


def test_a_new_run_moves_the_finished_one_aside_and_its_resume_continues(corpus, tmp_path,
                                                                          caplog):
    out = tmp_path / "run"
    model = _finished(corpus, out)
    old_steps = sorted(list_checkpoints(out, 0))
    with caplog.at_level(logging.WARNING), pytest.raises(RuntimeError, match="killed"):
        train(train_config(corpus, out, TINY, lr=0.25, checkpoint_every=3), _CrashAt(4))
    aside = next((out / "superseded").iterdir())
    assert f"moved to {aside}" in caplog.text
    assert (aside / "final.pt").read_bytes() == model
    assert sorted(list_checkpoints(aside, 0)) == old_steps
    assert (aside / "metrics.jsonl").exists() and (aside / "train.done.json").exists()
    assert (aside / "config.yaml").exists()
    # the interrupted new run resumes: the old run's marker no longer stands in its way
    assert list(list_checkpoints(out, 0)) == [3] and not (out / ".train.done").exists()
    _train(corpus, out, lr=0.25, resume=True)
    assert (out / "final.pt").read_bytes() != model
    assert isinstance(_train(corpus, out, lr=0.25), Skipped)


@pytest.mark.parametrize("option", ["data", "targets"])
def test_a_mistyped_input_after_a_finished_run_is_an_error_that_moves_nothing(
        corpus, tmp_path, option):
    """A typo in --data or --targets is no other run: the finished one stays where it is."""
    out = tmp_path / "run"
    model = _finished(corpus, out)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    data, targets = corpus
    typo = (Path(f"{data}_typo"), targets) if option == "data" else (data, Path(f"{targets}x"))
    with pytest.raises(AsrdistError, match=rf"^--{option} .*x?: no such file or directory; "
                                           r"the finished run in .* is left as it is$"):
        train(train_config(typo, out, TINY, lr=0.25), Single())
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert (out / "final.pt").read_bytes() == model


def test_discard_finished_deletes_it(corpus, tmp_path):
    out = tmp_path / "run"
    _finished(corpus, out)
    _train(corpus, out, lr=0.25, discard_finished=True)
    assert not (out / "superseded").exists()
    assert [r["resumed"] for r in read_metrics(out / "metrics.jsonl")
            if r["kind"] == "start"] == [False]


def test_a_batch_change_on_resume_consumes_the_whole_epoch(corpus, tmp_path):
    def frames(out: Path) -> int:
        return max(r["frames"] for r in read_metrics(out / "metrics.jsonl")
                   if r["kind"] == "train")

    straight = tmp_path / "straight"
    _train(corpus, straight)
    changed = tmp_path / "changed"
    with pytest.raises(RuntimeError, match="killed"):
        train(train_config(corpus, changed, TINY, checkpoint_every=4), _CrashAt(4))
    _train(corpus, changed, batch_size=16, resume=True, resume_allow="batch_size")
    # the same chunks, up to what a last partial batch of 16 leaves over
    assert 0 <= frames(straight) - frames(changed) < 16 * TINY["chunk_len"]


def _checkpoint(out: Path) -> Path:
    return checkpoint_dir(out, 0) / f"step{max(list_checkpoints(out, 0)):09d}.pt"


@pytest.mark.parametrize(("edit", "said"), [
    (lambda s: s.pop("format"), r"checkpoint format none \(an older asrdist\); this "
                                f"asrdist reads format {FORMAT}"),
    (lambda s: s.update(format=FORMAT + 1),
     f"checkpoint format {FORMAT + 1}; this asrdist reads format {FORMAT}"),
    (lambda s: s.pop("run"), "does not say what run it belongs to"),
])
def test_a_checkpoint_of_another_format_or_without_identity_is_refused(corpus, tmp_path, edit,
                                                                       said):
    out = tmp_path / "run"
    with pytest.raises(RuntimeError, match="killed"):
        train(train_config(corpus, out, TINY, checkpoint_every=3), _CrashAt(4))
    path = _checkpoint(out)
    state = torch.load(path, weights_only=False)
    edit(state)
    torch.save(state, path)
    with pytest.raises(AsrdistError, match=said):
        _train(corpus, out, resume=True)


def test_resume_allow_continues_a_finished_run_from_its_checkpoint(corpus, tmp_path):
    """--resume --resume-allow max_steps on a run finished at --max-steps: trained longer,
    from its last checkpoint, not refused and not retrained."""
    out = tmp_path / "run"
    _train(corpus, out, max_steps=4, checkpoint_every=2, epochs=3)
    _train(corpus, out, max_steps=8, checkpoint_every=2, epochs=3, resume=True,
           resume_allow="max_steps")
    starts = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "start"]
    assert [(s["step"], s["resumed"]) for s in starts] == [(0, False), (4, True)]
    assert not (out / "superseded").exists()
