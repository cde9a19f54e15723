"""A checkpoint is data: resuming from a crafted one runs none of its code, an old one holding
objects or one lacking an entry is one line naming the file, and what the trainer writes is
plain data that ``weights_only=True`` reads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from asrdist.cli.train import main
from asrdist.errors import AsrdistError
from asrdist.plaindata import first_unplain
from asrdist.testing.planted import (
    craft_ark_entry,
    craft_checkpoint,
    interrupted_run,
    invoke,
    train_args,
)
from asrdist.train.checkpoint import FORMAT, load_checkpoint, save_checkpoint


def _one_error_line(result) -> str:
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


@pytest.fixture
def interrupted(tmp_path):
    return interrupted_run(tmp_path)


def test_a_crafted_checkpoint_runs_nothing_on_resume(interrupted, tmp_path):
    resume, newest = interrupted
    marker = tmp_path / "ran"
    craft_checkpoint(newest, marker)
    line = _one_error_line(invoke(main, *resume))
    assert line.startswith(f"Error: {newest}: refused: the checkpoint holds an object "
                           "(getattr)"), line  # the pickle's first global: getattr(Path, ...)
    assert not marker.exists()


def test_an_old_checkpoint_holding_numpy_objects_is_one_line(interrupted):
    resume, newest = interrupted
    state = torch.load(newest, weights_only=True)
    state["format"] = 2
    state["rng"]["numpy"] = np.random.get_state()  # as asrdist wrote it before format 3
    torch.save(state, newest)
    line = _one_error_line(invoke(main, *resume))
    assert f"{newest}: refused: the checkpoint holds an object (numpy." in line
    assert f"older than format {FORMAT}" in line


@pytest.mark.parametrize("entry", ["stream", "rng", "optimizer"])
def test_a_checkpoint_without_an_entry_is_one_line_naming_it(interrupted, entry):
    resume, newest = interrupted
    state = torch.load(newest, weights_only=True)
    del state[entry]
    torch.save(state, newest)
    line = _one_error_line(invoke(main, *resume))
    assert line == f"Error: {newest}: not a whole checkpoint: it lacks its {entry} entry"


@pytest.mark.parametrize(("entry", "key"), [
    ("rng", "numpy"), ("stream", "rng"), ("run", "options"), ("optimizer", "param_groups"),
    ("model", "output.bias"), ("interval", "loss_sum"),
])
def test_a_checkpoint_entry_lacking_a_key_is_one_line_naming_both(interrupted, entry, key):
    """Loading checks the top-level entries only: a key missing inside one was a KeyError's
    traceback from wherever the trainer read it."""
    resume, newest = interrupted
    state = torch.load(newest, weights_only=True)
    del state[entry][key]
    torch.save(state, newest)
    line = _one_error_line(invoke(main, *resume))
    assert line == f"Error: {newest}: not a whole checkpoint: its {entry} entry lacks {key!r}"


def test_a_checkpoint_entry_of_the_wrong_shape_is_one_line_naming_it(interrupted):
    resume, newest = interrupted
    state = torch.load(newest, weights_only=True)
    state["optimizer"]["param_groups"] = []
    torch.save(state, newest)
    line = _one_error_line(invoke(main, *resume))
    assert line == (f"Error: {newest}: cannot restore its optimizer entry (loaded state dict "
                    "has a different number of parameter groups)")


def test_the_trainer_s_checkpoints_are_plain_data(interrupted):
    _, newest = interrupted
    state = torch.load(newest, weights_only=True)
    assert first_unplain(state) is None
    assert state["stream"] is not None and isinstance(state["stream"]["x"], torch.Tensor)


def test_saving_anything_but_plain_data_is_refused_before_writing(tmp_path):
    with pytest.raises(TypeError, match=r"state\['rng'\]\[1\]: numpy.ndarray"):
        save_checkpoint(tmp_path, 0, 1, {"rng": np.random.get_state()})
    with pytest.raises(TypeError, match=r"state\['lr'\]: numpy.float64"):
        save_checkpoint(tmp_path, 0, 1, {"lr": np.float64(0.5)})  # a float subclass
    with pytest.raises(AsrdistError, match="cannot load checkpoint"):
        load_checkpoint(tmp_path, 0, 1)  # nothing was written


def test_a_pickled_ark_entry_runs_nothing_and_is_one_line(tmp_path):
    """kaldiio unpickles an ark entry whose data starts with PKL: asrdist refuses it."""
    args = train_args(tmp_path)
    marker = tmp_path / "ran"
    ark = craft_ark_entry(tmp_path / "corpus" / "data" / "feats.scp", marker)
    line = _one_error_line(invoke(main, *args))
    assert f"{ark}:" in line and "refused: the entry is a Python pickle" in line, line
    assert not marker.exists()


def test_a_format3_checkpoint_is_read_as_format4_and_resumes(interrupted):
    """The one layout change of format 4 (a strategy's --compress state) is migrated on
    load, so a run checkpointed by the asrdist before resumes."""
    resume, newest = interrupted
    state = torch.load(newest, weights_only=True)
    state["format"] = 3
    state["strategy"] = {**state["strategy"], "compress": {"residual": torch.ones(2)}}
    torch.save(state, newest)
    step = int(newest.stem.removeprefix("step"))
    loaded = load_checkpoint(newest.parents[2], 0, step)
    assert loaded["format"] == FORMAT
    assert torch.equal(loaded["strategy"]["compress"]["sender"]["residual"], torch.ones(2))
    state["strategy"].pop("compress")
    torch.save(state, newest)
    assert invoke(main, *resume).exit_code == 0
