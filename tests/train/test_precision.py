"""Mixed precision: the dtype choice, the gradient scaler in the step and in checkpoints, and
a CPU learner that never wakes CUDA."""

from __future__ import annotations

import logging

import pytest
import torch

from asrdist.errors import AsrdistError
from asrdist.parallel.rules.update import DelayByOne
from asrdist.parallel.strategy import Single, train_step
from asrdist.testing import make_corpus
from asrdist.train import precision as precision_mod
from asrdist.train.checkpoint import capture_rng, list_checkpoints, load_checkpoint, restore_rng
from asrdist.train.metrics import read_metrics
from asrdist.train.precision import choose_precision
from asrdist.train.trainer import train
from tests.train.corpus import train_config, train_losses

CPU = torch.device("cpu")
DNN = dict(model="dnn", splice=1, hidden_layers=1, hidden_units=16, chunk_len=10, batch_size=8,
           shuffle_buffer=32, heldout_utts=2, log_every=1, lr=0.05, lr_ref_batch=8)


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus")


def test_fp32_asks_no_autocast_and_no_scaler():
    p = choose_precision("fp32", CPU)
    assert (p.autocast, p.lstm, p.scaled, p.name) == (None, torch.float32, False, "fp32")
    assert p.scaler() is None


def _raw_bf16_lstm_dtype() -> torch.dtype | None:
    """What torch itself (not asrdist) gives for an LSTM under bf16 autocast on this CPU; None
    where oneDNN has no bf16 LSTM primitive for it."""
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, _ = torch.nn.LSTM(3, 3, batch_first=True)(torch.zeros(1, 2, 3))
    except RuntimeError:
        return None
    return out.dtype


def test_bf16_is_what_the_lstm_really_runs_in_here():
    """bf16 is chosen, unscaled, where this CPU's oneDNN runs the LSTM in bf16; where it has no
    such primitive (some CPUs the CI draws) the choice is refused in one line naming the option."""
    raw = _raw_bf16_lstm_dtype()
    if raw is None:
        with pytest.raises(AsrdistError, match=r"^--precision bf16: not available on cpu \("):
            choose_precision("bf16", CPU)
        return
    p = choose_precision("bf16", CPU)
    assert (p.autocast, p.lstm, p.scaled) == (torch.bfloat16, raw, False)
    with p.autocast_context():
        out, _ = torch.nn.LSTM(3, 3, batch_first=True)(torch.zeros(1, 2, 3))
    assert out.dtype == raw


def test_bf16_that_runs_the_lstm_in_fp16_falls_back_to_scaled_fp16(monkeypatch, caplog):
    """As cuDNN's autocast wrapper does where torch/cuDNN cannot run a bf16 LSTM."""
    monkeypatch.setattr(precision_mod, "lstm_dtype_under_autocast",
                        lambda device_type, dtype: torch.float16)
    with caplog.at_level(logging.WARNING):
        p = choose_precision("bf16", CPU)
    assert (p.autocast, p.lstm, p.scaled, p.name) == (torch.float16, torch.float16, True, "fp16")
    assert "runs the LSTM in fp16" in caplog.text
    assert p.describe() == {"precision": "fp16", "precision_requested": "bf16",
                            "lstm_dtype": "float16", "loss_scaling": True}


def test_fp16_is_scaled_and_a_model_without_lstm_needs_no_probe(monkeypatch):
    def probe(device_type, dtype):
        raise AssertionError("probed an LSTM for a DNN")

    monkeypatch.setattr(precision_mod, "lstm_dtype_under_autocast", probe)
    p = choose_precision("fp16", CPU, lstm=False)
    assert (p.autocast, p.lstm, p.scaled) == (torch.float16, None, True)
    assert isinstance(p.scaler(), torch.amp.GradScaler)


def test_unknown_or_unavailable_precision_is_refused_by_name():
    with pytest.raises(AsrdistError, match="--precision fp8: use one of fp32, bf16, fp16"):
        choose_precision("fp8", CPU)


def test_a_step_with_non_finite_gradients_is_skipped_and_the_scale_lowered():
    model = torch.nn.Linear(2, 1, bias=False)
    before = model.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    train_step(Single(), model, opt, 0, lambda m: m(torch.tensor([[float("inf"), 1.0]])).sum(),
               scaler=scaler)
    assert torch.equal(model.weight, before)
    assert scaler.get_scale() == 2.0
    train_step(Single(), model, opt, 1, lambda m: m(torch.tensor([[1.0, 1.0]])).sum(),
               scaler=scaler)
    # the gradient is ones, unscaled (1/2 of the scaled one), so one plain SGD step
    assert torch.allclose(model.weight, before - 0.1)


def test_the_hooks_see_unscaled_gradients():
    seen = []

    class Spy(Single):
        def after_backward(self, model, step):
            seen.append(model.weight.grad.clone())

    model = torch.nn.Linear(1, 1, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    train_step(Spy(), model, opt, 0, lambda m: 3.0 * m(torch.ones(1, 1)).sum(),
               scaler=torch.amp.GradScaler("cpu", init_scale=1024.0))
    assert seen == [torch.tensor([[3.0]])]


def test_delay_by_one_never_keeps_a_non_finite_gradient():
    w = torch.nn.Parameter(torch.zeros(2))
    rule = DelayByOne()
    w.grad = torch.tensor([1.0, float("inf")])
    rule.swap([w])
    w.grad = torch.tensor([5.0, 6.0])
    rule.swap([w])
    assert torch.equal(w.grad, torch.zeros(2))  # the non-finite one, dropped whole
    rule.swap([w])
    assert torch.equal(w.grad, torch.tensor([5.0, 6.0]))


def test_fp16_training_checkpoints_its_scaler_and_resumes_bit_for_bit(corpus, tmp_path):
    """A DNN in fp16 on the CPU (no LSTM: CPU autocast has no fp16 LSTM): the scaler's state
    is in every checkpoint, the start record says what ran, and a resume continues exactly."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(train_config(corpus, straight, DNN, precision="fp16", epochs=2), Single())
    train(train_config(corpus, resumed, DNN, precision="fp16", epochs=2, max_steps=7,
                       checkpoint_every=7), Single())
    state = load_checkpoint(resumed, 0, max(list_checkpoints(resumed, 0)))
    assert state["scaler"]["scale"] > 0 and "_growth_tracker" in state["scaler"]
    train(train_config(corpus, resumed, DNN, precision="fp16", epochs=2, resume=True),
          Single())
    assert train_losses(resumed / "metrics.jsonl") == train_losses(straight / "metrics.jsonl")
    records = read_metrics(straight / "metrics.jsonl")
    start = next(r for r in records if r["kind"] == "start")
    assert (start["precision"], start["lstm_dtype"], start["loss_scaling"]) == \
        ("fp16", "none", True)
    assert all(r["loss_scale"] > 0 for r in records if r["kind"] == "train")


class _NoCuda:
    """torch.cuda as a host with GPUs would have it, where any use of a GPU fails the test."""

    NAMES = ("get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all",
             "init", "_lazy_init", "current_device", "set_device", "synchronize")

    def __init__(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
        for name in self.NAMES:
            monkeypatch.setattr(torch.cuda, name, self._touched(name))

    @staticmethod
    def _touched(name: str):
        def touched(*args, **kwargs):
            raise AssertionError(f"a CPU learner called torch.cuda.{name}")

        return touched


def test_a_cpu_learner_saves_and_restores_its_generators_without_cuda(monkeypatch):
    _NoCuda(monkeypatch)
    state = capture_rng(CPU)
    assert "cuda" not in state
    expected = torch.rand(3)
    restore_rng(state, CPU)
    assert torch.equal(torch.rand(3), expected)


def test_a_cpu_learner_on_a_gpu_host_trains_and_resumes_without_cuda(corpus, tmp_path,
                                                                     monkeypatch):
    _NoCuda(monkeypatch)
    out = tmp_path / "run"
    train(train_config(corpus, out, DNN, epochs=1, max_steps=4, checkpoint_every=2), Single())
    train(train_config(corpus, out, DNN, epochs=1, max_steps=6, resume=True,
                       resume_allow="max_steps"), Single())
    assert (out / "final.pt").exists()


@pytest.mark.cuda
def test_checkpoints_hold_only_the_learners_own_gpu_generator():
    device = torch.device("cuda", torch.cuda.device_count() - 1)
    state = capture_rng(device)
    assert torch.equal(state["cuda"], torch.cuda.get_rng_state(device))
    expected = torch.rand(3, device=device)
    restore_rng(state, device)
    assert torch.equal(torch.rand(3, device=device), expected)
