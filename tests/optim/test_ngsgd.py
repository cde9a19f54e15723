"""NG-SGD: the hooks give each affine layer Kaldi's preconditioned gradient; exact resume."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from torch import nn

from asrdist.errors import AsrdistError
from asrdist.models.blstm import BLSTM
from asrdist.models.dnn import DNN
from asrdist.optim.build import OptimizerOptions, build_optimizer
from asrdist.optim.ngsgd import NGSGD, NGOptions

SMALL = NGOptions(rank_in=4, rank_out=3, update_period=2, num_samples_history=500.0, alpha=4.0)


def _batch(seed: int, frames: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(6, frames, 7, generator=g), torch.randint(0, 5, (6, 5), generator=g)


def _dnn() -> DNN:
    torch.manual_seed(0)
    return DNN(7, 5, splice=2, hidden_layers=2, hidden_units=16)


def _step(model: nn.Module, opt: torch.optim.Optimizer, seed: int) -> torch.Tensor:
    x, y = _batch(seed)
    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


def test_weight_and_bias_gradients_are_the_preconditioned_products():
    model = _dnn()
    opt = NGSGD(model, SMALL, lr=0.1)
    for seed in range(3):
        _step(model, opt, seed)
    layer = model.net[2]  # the second hidden layer
    state = opt.layers[1]
    assert state.layer is layer
    pre_in, pre_out = copy.deepcopy(state.pre_in), copy.deepcopy(state.pre_out)
    seen = {}

    def record(module, inputs, output):
        seen["x"] = inputs[0].detach()
        output.register_hook(lambda g: seen.update(g=g.detach()))

    layer.register_forward_hook(record)
    x, y = _batch(7)
    opt.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
    x_in = seen["x"].reshape(-1, 16)
    x_in = torch.cat([x_in, torch.ones(len(x_in), 1)], dim=1)
    g_out = seen["g"].reshape(-1, 16)
    in_hat, gamma_in = pre_in.precondition(x_in)
    out_hat, gamma_out = pre_out.precondition(g_out)
    expected = gamma_in * gamma_out * out_hat.T @ in_hat
    torch.testing.assert_close(layer.weight.grad, expected[:, :-1])
    torch.testing.assert_close(layer.bias.grad, expected[:, -1])
    plain = g_out.T @ x_in[:, :-1]
    assert not torch.allclose(layer.weight.grad, plain, rtol=0.1, atol=1e-4)


def _run(model: nn.Module, opt: torch.optim.Optimizer, seeds: range) -> list[float]:
    return [float(_step(model, opt, s)) for s in seeds]


def test_resume_from_state_dict_is_exact():
    model = _dnn()
    opt = NGSGD(model, SMALL, lr=0.2, momentum=0.9)
    straight = _run(model, opt, range(30))
    first = _dnn()
    opt1 = NGSGD(first, SMALL, lr=0.2, momentum=0.9)
    losses = _run(first, opt1, range(13))
    buf = io.BytesIO()
    torch.save({"model": first.state_dict(), "opt": opt1.state_dict()}, buf)
    buf.seek(0)
    saved = torch.load(buf, weights_only=False)
    second = _dnn()
    opt2 = NGSGD(second, SMALL, lr=0.2, momentum=0.9)
    second.load_state_dict(saved["model"])
    opt2.load_state_dict(saved["opt"])
    losses += _run(second, opt2, range(13, 30))
    assert losses == straight
    for a, b in zip(model.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)


def test_loading_a_plain_sgd_state_is_refused():
    model = _dnn()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    _run(model, sgd, range(2))
    with pytest.raises(AsrdistError, match="--optimizer ngsgd"):
        NGSGD(model, SMALL, lr=0.1, momentum=0.9).load_state_dict(sgd.state_dict())


def test_ngsgd_learns_faster_than_its_first_loss():
    model = _dnn()
    opt = build_optimizer(OptimizerOptions(optimizer="ngsgd", momentum=0.0), model, 0.5, SMALL)
    losses = _run(model, opt, [0] * 40)  # one batch again and again: memorise it
    assert losses[-1] < 0.3 * losses[0]


def test_bf16_autocast_gives_float32_preconditioned_gradients():
    model = _dnn()
    opt = NGSGD(model, SMALL, lr=0.1)
    x, y = _batch(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
    loss = nn.functional.cross_entropy(out.float().flatten(0, 1), y.flatten())
    loss.backward()
    for p in model.parameters():
        assert p.grad.dtype == torch.float32 and bool(torch.isfinite(p.grad).all())
    assert opt.layers[0].pre_in.t == 1 and opt.layers[0].pre_in.W.dtype == torch.float32


def test_blstm_lstm_weights_keep_the_plain_gradient():
    torch.manual_seed(0)
    model = BLSTM(7, 5, layers=1, units=6, bottleneck=4)
    reference = copy.deepcopy(model)
    opt = NGSGD(model, SMALL, lr=0.1)
    assert [layer.layer for layer in opt.layers] == [model.bottleneck, model.output]
    x, y = _batch(2, frames=5)
    for m in (model, reference):
        nn.functional.cross_entropy(m(x).flatten(0, 1), y.flatten()).backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        same = torch.equal(p.grad, q.grad)
        assert same == name.startswith("lstm."), name


def test_no_grad_forward_leaves_the_preconditioners_alone():
    model = _dnn()
    opt = NGSGD(model, SMALL, lr=0.1)
    with torch.no_grad():
        model(_batch(0)[0])
    assert all(layer.x is None for layer in opt.layers)


@pytest.mark.cuda
def test_cuda_steps_match_the_cpu_steps():
    cpu = _dnn()
    cuda = copy.deepcopy(cpu).cuda()
    cpu_opt, cuda_opt = NGSGD(cpu, SMALL, lr=0.1), NGSGD(cuda, SMALL, lr=0.1)
    for seed in range(5):
        x, y = _batch(seed)
        for model, opt, dev in ((cpu, cpu_opt, "cpu"), (cuda, cuda_opt, "cuda")):
            loss = nn.functional.cross_entropy(model(x.to(dev)).flatten(0, 1),
                                               y.to(dev).flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    for a, b in zip(cpu.parameters(), cuda.parameters(), strict=True):
        torch.testing.assert_close(a, b.cpu(), rtol=1e-4, atol=1e-5)


def _old_way_expected(model: nn.Module, opt: NGSGD, x: torch.Tensor, y: torch.Tensor) -> list:
    """Each preconditioned layer's (weight, bias) gradient for the batch (x, y), computed the
    way the hook implementation did: the plain backward's layer inputs and output
    derivatives, preconditioned by copies of the layers' preconditioners as they are now."""
    copies = [(copy.deepcopy(s.pre_in), copy.deepcopy(s.pre_out)) for s in opt.layers]
    reference = copy.deepcopy(model)  # the forwards of its layers are the patched ones:
    linears = [m for m in reference.modules() if isinstance(m, nn.Linear)]
    for layer in linears:  # back to nn.Linear's own
        del layer.forward
    seen: dict[int, dict[str, torch.Tensor]] = {}

    def record(index: int):
        def hook(module, inputs, output):
            seen[index] = {"x": inputs[0].detach()}
            output.register_hook(lambda g: seen[index].update(g=g.detach()))
        return hook

    for index, layer in enumerate(linears):
        layer.register_forward_hook(record(index))
    nn.functional.cross_entropy(reference(x).flatten(0, 1), y.flatten()).backward()
    expected = []
    for index, (pre_in, pre_out) in enumerate(copies):
        x_in = seen[index]["x"].reshape(-1, seen[index]["x"].shape[-1])
        x_in = torch.cat([x_in, torch.ones(len(x_in), 1)], dim=1)
        g_out = seen[index]["g"].reshape(-1, seen[index]["g"].shape[-1])
        in_hat, gamma_in = pre_in.precondition(x_in)
        out_hat, gamma_out = pre_out.precondition(g_out)
        grad = gamma_in * gamma_out * (out_hat.T @ in_hat)
        expected.append((grad[:, :-1], grad[:, -1]))
    return expected


@pytest.mark.parametrize("kind", ["dnn", "blstm"])
def test_the_direct_gradient_equals_the_hook_way_over_update_and_apply_only_steps(kind):
    torch.manual_seed(0)
    if kind == "dnn":
        model: nn.Module = _dnn()
        batch = _batch
    else:
        model = BLSTM(7, 5, layers=2, units=6, bottleneck=4)
        batch = lambda seed: _batch(seed, frames=5)  # noqa: E731
    opt = NGSGD(model, SMALL, lr=0.1, momentum=0.5)
    for seed in range(16):  # initialising, every-step updates, then every update_period
        x, y = batch(seed)
        expected = _old_way_expected(model, opt, x, y)
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        for state, (weight, bias) in zip(opt.layers, expected, strict=True):
            torch.testing.assert_close(state.layer.weight.grad, weight, rtol=1e-4, atol=1e-6)
            torch.testing.assert_close(state.layer.bias.grad, bias, rtol=1e-4, atol=1e-6)
        opt.step()
    assert opt.layers[0].pre_in.t == 16 and opt.layers[-1].pre_out.t == 16


def test_a_second_backward_through_one_forward_is_refused():
    model = _dnn()
    NGSGD(model, SMALL, lr=0.1)
    x, y = _batch(0)
    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
    loss.backward(retain_graph=True)
    with pytest.raises(AsrdistError, match="second backward"):
        loss.backward()
