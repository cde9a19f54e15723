"""NG-SGD under ssgd: DDP averages the preconditioned gradients of the learners."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn

from asrdist.optim.ngsgd import NGSGD
from asrdist.parallel.registry import make_strategy
from asrdist.parallel.strategy import Learner
from asrdist.testing.learners import launch
from tests.optim.test_ngsgd import SMALL, _batch, _dnn


def _grads(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def _learner(rank: int, n: int) -> dict[str, torch.Tensor | int]:
    strategy = make_strategy("ssgd", Learner(rank, 2))
    model = _dnn()
    alone = copy.deepcopy(model)
    wrapped = strategy.wrap_model(model)
    opt = NGSGD(wrapped, SMALL, lr=0.1)
    opt_alone = NGSGD(alone, SMALL, lr=0.1)
    x, y = _batch(100 + rank)
    for m in (wrapped, alone):
        nn.functional.cross_entropy(m(x).flatten(0, 1), y.flatten()).backward()
    strategy.after_backward(wrapped, 0)
    mine = _grads(alone)
    both = [torch.empty_like(mine) for _ in range(2)]
    dist.all_gather(both, mine)
    strategy.close()
    return {"ddp": _grads(model), "mean": (both[0] + both[1]) / 2,
            "t": opt.layers[0].pre_in.t + opt_alone.layers[0].pre_in.t}


def test_ssgd_allreduces_the_preconditioned_gradients():
    results = launch(_learner, 2, timeout_s=120)
    for r in results:
        assert r["t"] == 2
        torch.testing.assert_close(r["ddp"], r["mean"], rtol=1e-5, atol=1e-7)
    assert not torch.allclose(results[0]["mean"], _plain_mean(), atol=1e-4)


def _plain_mean() -> torch.Tensor:
    """The mean of the two learners' plain (unpreconditioned) gradients."""
    grads = []
    for rank in range(2):
        model = _dnn()
        x, y = _batch(100 + rank)
        nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        grads.append(_grads(model))
    return (grads[0] + grads[1]) / 2
