"""NG-SGD under ssgd: DDP averages the preconditioned gradients of the learners."""

from __future__ import annotations

import copy
import multiprocessing
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn

from asrdist.optim.ngsgd import NGSGD
from asrdist.parallel.launch import free_port
from asrdist.parallel.registry import make_strategy
from asrdist.parallel.strategy import Learner
from tests.optim.test_ngsgd import SMALL, _batch, _dnn


def _grads(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def _learner(rank: int, port: int, out: str) -> None:
    torch.set_num_threads(1)  # a forked child must not reuse the parent's OpenMP pool
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2, timeout=timedelta(seconds=30))
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
    torch.save({"ddp": _grads(model), "mean": (both[0] + both[1]) / 2,
                "t": opt.layers[0].pre_in.t + opt_alone.layers[0].pre_in.t}, f"{out}/{rank}.pt")
    strategy.close()
    dist.destroy_process_group()


def test_ssgd_allreduces_the_preconditioned_gradients(tmp_path):
    port = free_port()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_learner, args=(r, port, str(tmp_path))) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    codes = [p.exitcode for p in procs]
    for p in procs:
        if p.exitcode is None:
            p.kill()
    assert codes == [0, 0]
    results = [torch.load(tmp_path / f"{r}.pt") for r in range(2)]
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
