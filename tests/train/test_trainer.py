"""The training loop: learning, resume bit for bit, crash safety, NaN stop, hooks, sharding."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from asrdist.errors import AsrdistError
from asrdist.models.final import load_final
from asrdist.parallel.strategy import Learner, Single, Strategy
from asrdist.testing import make_corpus
from asrdist.train import checkpoint as checkpoint_mod
from asrdist.train.checkpoint import list_checkpoints, load_checkpoint
from asrdist.train.metrics import read_metrics
from asrdist.train.trainer import train
from tests.train.corpus import poison_features, train_config, train_losses

TINY = dict(layers=1, units=16, chunk_len=10, batch_size=8, shuffle_buffer=32, heldout_utts=2,
            log_every=1, lr=0.5, lr_ref_batch=8, warmup_epochs=0.5, cmvn="spk")


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus")


def _config(corpus, out, **kw):
    return train_config(corpus, out, TINY, **kw)


def _losses(out: Path) -> list[tuple[int, float]]:
    return train_losses(out / "metrics.jsonl")


@pytest.mark.parametrize(("model", "lr"), [("blstm", 0.5), ("dnn", 0.05)])
def test_model_overfits_a_tiny_set(corpus, tmp_path, model, lr):
    result = train(_config(corpus, tmp_path / model, model=model, epochs=8, splice=2, lr=lr,
                           hidden_layers=2, hidden_units=32, heldout_utts=0), Single())
    losses = [loss for _, loss in _losses(tmp_path / model)]
    assert losses[0] > 1.0
    assert max(losses[-3:]) < 0.05
    assert result.final == tmp_path / model / "final.pt"


def test_final_pt_has_what_decoding_needs(corpus, tmp_path):
    out = tmp_path / "run"
    train(_config(corpus, out, epochs=2, bottleneck=6), Single())
    model, exported = load_final(out / "final.pt")
    assert exported.input_dim == 13 and exported.num_pdfs == 5
    assert exported.cmvn == "spk" and exported.left_context == 0
    counts = np.array(
        (corpus[1] / "pdf_counts").read_text().strip("[] \n").split(), dtype=float
    )
    np.testing.assert_allclose(exported.log_priors, np.log(counts / counts.sum()), rtol=1e-5)
    assert exported.steps > 0 and exported.algo == "single" and exported.world_size == 1
    # what made the features, for decoding to refuse others
    assert exported.feats_config == json.loads((corpus[0] / "feats_config.json").read_text())
    assert model(torch.zeros(1, 7, 13)).shape == (1, 7, 5)
    used = yaml.safe_load((out / "config.yaml").read_text())
    assert used["bottleneck"] == 6 and used["chunk_len"] == 10
    records = read_metrics(out / "metrics.jsonl")
    heldout = [r for r in records if r["kind"] == "heldout"]
    assert [r["epoch"] for r in heldout] == [1, 2]
    assert all(0 <= r["heldout_acc"] <= 1 and r["heldout_ce"] > 0 for r in heldout)
    train_records = [r for r in records if r["kind"] == "train"]
    assert {"step", "epoch", "wall_s", "frames", "loss", "lr", "rank"} <= set(train_records[0])


@pytest.mark.parametrize("masks", [{}, {"feature_masks": 2, "time_masks": 1, "vtlp_warp": 0.1}],
                         ids=["plain", "spec-augment-vtlp"])
def test_interrupted_run_resumes_with_identical_losses(corpus, tmp_path, masks):
    """Kill a real training process after a checkpoint; the resumed losses match bit for bit
    (SpecAugment's masks and VTLP's warps too: their generators are checkpointed)."""
    reference = tmp_path / "reference"
    train(_config(corpus, reference, epochs=200, max_steps=60, checkpoint_every=5, **masks),
          Single())
    interrupted = tmp_path / "interrupted"
    data, targets = corpus
    args = [f"--{k.replace('_', '-')}={v}" for k, v in {**TINY, **masks}.items()]
    cmd = [sys.executable, "-c", "from asrdist.cli.train import main; main()",
           f"--data={data}", f"--targets={targets}", f"--out={interrupted}", "--epochs=200",
           "--checkpoint-every=5", *args]
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list_checkpoints(interrupted, 0) and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (interrupted / "final.pt").exists()
    resumed_from = max(list_checkpoints(interrupted, 0))
    assert resumed_from < 60
    train(_config(corpus, interrupted, epochs=200, max_steps=60, checkpoint_every=5,
                  resume=True, **masks), Single())
    assert _losses(interrupted) == _losses(reference)
    assert len(_losses(reference)) == 60


def test_crash_while_writing_a_checkpoint_keeps_the_previous_one(corpus, tmp_path, monkeypatch):
    out = tmp_path / "run"
    real_save = torch.save
    calls = []

    def failing_save(obj, f):
        calls.append(f)
        if len(calls) == 2:
            f.write(b"half a checkpoint")
            raise OSError(28, "No space left on device")
        real_save(obj, f)

    monkeypatch.setattr(checkpoint_mod.torch, "save", failing_save)
    with pytest.raises(AsrdistError, match=r"rank0/step000000007.pt: cannot write the checkpoint: "
                                           "No space left on device"):
        train(_config(corpus, out, epochs=3, checkpoint_every=5), Single())
    monkeypatch.setattr(checkpoint_mod.torch, "save", real_save)
    assert sorted(list_checkpoints(out, 0)) == [5]
    assert [p.name for p in (out / "checkpoints" / "rank0").iterdir()] == ["step000000005.pt"]
    assert load_checkpoint(out, 0, 5)["step"] == 5
    train(_config(corpus, out, epochs=3, checkpoint_every=5, resume=True), Single())
    train(_config(corpus, tmp_path / "clean", epochs=3, checkpoint_every=5), Single())
    assert _losses(out) == _losses(tmp_path / "clean")


class Diverge(Single):
    """Weights turn NaN before step ``at`` (a diverging run, as a too-high --lr makes)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def before_step(self, model, step):
        if step == self.at:
            with torch.no_grad():
                for p in model.parameters():
                    p.fill_(float("nan"))


def test_nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(tmp_path):
    data, targets = make_corpus(tmp_path / "corpus", num_utts=30)
    out = tmp_path / "run"
    cfg = _config((data, targets), out, epochs=2, checkpoint_every=1, cmvn="utt",
                  shuffle_buffer=8, heldout_utts=0)
    with pytest.raises(AsrdistError, match=r"loss is nan at step (\d+)") as err:
        train(cfg, Diverge(at=6))
    step = int(err.value.message.split("at step ")[1].split()[0])
    kept = list_checkpoints(out, 0)
    assert step > 1 and max(kept) == step - 1
    assert str(kept[step - 1]) in err.value.message
    weights = load_checkpoint(out, 0, step - 1)["model"]
    assert all(torch.isfinite(w).all() for w in weights.values())
    assert not (out / "final.pt").exists()


def test_nan_loss_is_named_exactly_without_reading_every_loss(tmp_path):
    """The loss is read only at a record: the first non-finite one is still named exactly."""
    data, targets = make_corpus(tmp_path / "corpus", num_utts=30)
    messages = []
    for log_every in (1, 50):
        cfg = _config((data, targets), tmp_path / f"run{log_every}", epochs=2, cmvn="utt",
                      checkpoint_every=0, shuffle_buffer=8, heldout_utts=0, log_every=log_every)
        with pytest.raises(AsrdistError, match="loss is nan at step 8 ") as err:
            train(cfg, Diverge(at=7))
        messages.append(err.value.message)
    assert messages[0] == messages[1]


def test_nan_in_the_features_names_the_utterance(tmp_path):
    data, targets = make_corpus(tmp_path / "corpus", num_utts=30)
    utt = poison_features(data)
    cfg = _config((data, targets), tmp_path / "run", epochs=1, cmvn="utt", heldout_utts=0)
    with pytest.raises(AsrdistError, match=f"utterance {utt}: features hold NaN or inf "
                                           r"\(first at frame 3, .*nan.ark"):
        train(cfg, Single())


class Recorder(Strategy):
    """Logs every hook call, to check the trainer's contract with strategies."""

    name = "recorder"

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.wrapped: torch.nn.Module | None = None

    def wrap_model(self, model):
        self.calls.append(("wrap_model",))
        self.wrapped = model
        return model

    def before_step(self, model, step):
        assert model is self.wrapped
        self.calls.append(("before_step", step))

    def after_backward(self, model, step):
        assert all(p.grad is not None for p in model.parameters())
        self.calls.append(("after_backward", step))

    def after_step(self, model, step):
        self.calls.append(("after_step", step))

    def sync(self, model):
        assert model is self.wrapped
        self.calls.append(("sync",))

    def finalize(self, model):
        self.calls.append(("finalize",))

    def metrics(self):
        return {"exchanges": len(self.calls)}

    def state_dict(self):
        self.calls.append(("state_dict",))
        return {"calls": len(self.calls)}

    def close(self):
        self.calls.append(("close",))


def test_trainer_calls_the_strategy_hooks_in_order(corpus, tmp_path):
    strategy = Recorder()
    out = tmp_path / "run"
    result = train(_config(corpus, out, epochs=2, checkpoint_every=3), strategy)
    names = [c[0] for c in strategy.calls]
    assert names[0] == "wrap_model" and names[-2:] == ["finalize", "close"]
    # every checkpoint (state_dict) and held-out evaluation comes right after a sync
    saves = [i for i, n in enumerate(names) if n == "state_dict"]
    assert len(saves) == 2 + 4 and all(names[i - 1] == "sync" for i in saves)
    heldout = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "heldout"]
    assert names.count("sync") == len(saves) + len(heldout) == 6 + 2
    steps = [c for c in strategy.calls
             if c[0] not in ("wrap_model", "sync", "state_dict", "finalize", "close")]
    assert len(steps) == 3 * result.steps
    for k in range(result.steps):
        assert steps[3 * k: 3 * k + 3] == [("before_step", k), ("after_backward", k),
                                           ("after_step", k)]
    assert all("exchanges" in r for r in read_metrics(out / "metrics.jsonl")
               if r["kind"] in ("train", "heldout"))
    last = max(list_checkpoints(out, 0))
    assert load_checkpoint(out, 0, last)["strategy"]["calls"] > 0


def test_strategy_is_closed_on_error(corpus, tmp_path):
    strategy = Recorder()
    with pytest.raises(AsrdistError):
        train(_config(corpus, tmp_path / "run", data=str(tmp_path / "missing")), strategy)
    assert strategy.calls == [("close",)]


class _Apart:
    """The transport of learner ``rank`` of two that never meet (no process group, one after
    the other in this process): each agreement is its own alone."""

    def __init__(self, rank: int) -> None:
        self.rank, self.world_size = rank, 2

    def gather(self, mine):
        return {self.rank: mine}

    def departed(self):
        return {}  # no learner can leave (final.pt's learners_lost)


def test_learners_take_equal_steps_on_disjoint_shards(corpus, tmp_path):
    out = tmp_path / "run"
    results = [train(_config(corpus, out, epochs=2), Single(),
                     Learner(r, 2, transport=_Apart(r)))  # type: ignore[arg-type]
               for r in (1, 0)]
    assert results[0].steps == results[1].steps > 0
    assert results[0].final is None and results[1].final == out / "final.pt"
    rank1 = read_metrics(out / "metrics.rank1.jsonl")
    assert {r["rank"] for r in rank1} == {1}
    assert list_checkpoints(out, 1) and list_checkpoints(out, 0)
    start = next(r for r in rank1 if r["kind"] == "start")
    assert start["world_size"] == 2 and start["peak_lr"] == pytest.approx(1.0)  # 0.5 x 16/8
    assert _losses(out) != [(r["step"], r["loss"]) for r in rank1 if r["kind"] == "train"]


def test_rerunning_without_resume_refuses_to_overwrite(corpus, tmp_path):
    out = tmp_path / "run"
    train(_config(corpus, out, epochs=1, max_steps=3), Single())
    (out / ".train.done").unlink()
    with pytest.raises(AsrdistError, match="pass --resume"):
        train(_config(corpus, out, epochs=1), Single())


def test_resume_without_a_checkpoint_starts_afresh(corpus, tmp_path):
    out = tmp_path / "run"
    result = train(_config(corpus, out, epochs=1, max_steps=2, resume=True), Single())
    assert result.steps == 2 and (out / "final.pt").is_file()
    start = read_metrics(out / "metrics.jsonl")[0]
    assert start["kind"] == "start" and start["step"] == 0 and start["resumed"] is False


def test_resuming_with_other_model_options_is_refused(corpus, tmp_path):
    out = tmp_path / "run"
    train(_config(corpus, out, epochs=1, max_steps=3), Single())
    (out / ".train.done").unlink()
    with pytest.raises(AsrdistError, match="model options differ from the checkpoint"):
        train(_config(corpus, out, epochs=1, units=24, resume=True), Single())


@pytest.mark.cuda
def test_cuda_bf16_training_learns(corpus, tmp_path):
    train(_config(corpus, tmp_path / "cuda", epochs=8, device="cuda", precision="bf16"), Single())
    losses = [loss for _, loss in _losses(tmp_path / "cuda")]
    assert losses[-1] < 0.3 * losses[0]


class Merging(Strategy):
    """Like ADPSGD: ``sync`` merges an exchange still in flight into the weights (here by
    giving a parameter new storage, so a model state taken earlier would miss it)."""

    name = "merging"

    def __init__(self) -> None:
        self.merged: list[dict[str, torch.Tensor]] = []
        self.events: list[str] = []

    def sync(self, model):
        p = next(model.parameters())
        p.data = p.data + 0.25
        self.merged.append({k: v.clone() for k, v in model.state_dict().items()})
        self.events.append("sync")

    def state_dict(self):
        self.events.append("state_dict")
        return {"merges": len(self.merged)}

    def finalize(self, model):
        self.events.append("finalize")


def test_checkpoint_saves_the_weights_after_the_strategy_merged(corpus, tmp_path):
    strategy = Merging()
    out = tmp_path / "run"
    train(_config(corpus, out, epochs=2, checkpoint_every=4, keep_checkpoints=10,
                  heldout_utts=0), strategy)
    saved = [load_checkpoint(out, 0, s) for s in sorted(list_checkpoints(out, 0))]
    assert len(saved) == len(strategy.merged) >= 3
    for n, (state, merged) in enumerate(zip(saved, strategy.merged, strict=True), 1):
        assert all(torch.equal(state["model"][k], merged[k]) for k in merged)
        assert state["strategy"]["merges"] == n  # state_dict comes after the sync
    assert strategy.events[-1] == "finalize"  # after the last checkpoint
