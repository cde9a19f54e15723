"""DeviceStaging on CPU (the GPU path needs CUDA: the ``cuda``-marked tests, not run without
one), and the exchange thread's ``ready`` hook, which the GPU path relies on to read a snapshot
only once its gather is done."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from asrdist.parallel.processes.exchange import PairwiseExchange, make_exchange_group
from asrdist.parallel.rules.staging import DeviceStaging
from asrdist.parallel.rules.weights import flat_weights
from asrdist.testing.learners import launch


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2))


def test_cpu_snapshot_is_the_flat_weights_ready_at_once():
    model = _model(0)
    staging = DeviceStaging(model)
    snapshot, ready = staging.snapshot(model)
    assert ready is None and not staging.on_gpu
    assert torch.equal(snapshot, flat_weights(model))
    assert staging.numel == snapshot.numel() == 4 * 6 + 6 + 6 * 2 + 2


def test_cpu_add_adds_the_flat_delta_into_each_parameter():
    a = _model(0)
    delta = torch.randn(DeviceStaging(a).numel, generator=torch.Generator().manual_seed(3))
    expected = flat_weights(a) + delta
    DeviceStaging(a).add(a, delta)
    assert torch.equal(flat_weights(a), expected)


def test_zeros_are_plain_zeros_on_cpu():
    buf = DeviceStaging(_model(0)).zeros(5)
    assert torch.equal(buf, torch.zeros(5)) and not buf.is_pinned()


def test_snapshots_alternate_between_two_vectors_made_once():
    model = _model(0)
    staging = DeviceStaging(model)
    ptrs = []
    for k in range(5):
        with torch.no_grad():
            next(model.parameters()).add_(1.0)
        snapshot, _ = staging.snapshot(model)
        assert torch.equal(snapshot, flat_weights(model)), k
        ptrs.append(snapshot.data_ptr())
    assert ptrs[0] != ptrs[1] and ptrs[::2] == [ptrs[0]] * 3 and ptrs[1::2] == [ptrs[1]] * 2


def _pair(rank: int, n: int) -> tuple[list[float], int]:
    """Each learner hands the exchange a vector still "in copy" (NaN) whose ``ready`` fills
    it: the swap is exact only if the thread waited for ``ready`` before reading."""
    group = make_exchange_group([0, 1], 30)
    eng = PairwiseExchange(group=group, ranks=[0, 1], index=rank, weights=torch.zeros(3),
                           partner_of=lambda r: 0, timeout_s=30, rank=rank)
    buf = torch.full((3,), float("nan"))
    calls = []

    def ready() -> None:
        calls.append(1)
        buf.copy_(torch.full((3,), 10.0 * (rank + 1)))

    if eng.active:  # index 1
        dist.barrier()  # the passive has published: else it serves its initial weights (0)
        eng.start(buf, ready)
        delta = eng.wait()
        eng.finish()
    else:
        eng.publish(buf, ready)
        dist.barrier()
        eng.finish()  # returns once the active learner said DONE: its exchange was served
        delta, _ = eng.take_pending()
    return delta.tolist(), len(calls)


def test_exchange_waits_for_ready_before_reading_a_snapshot():
    out = launch(_pair, 2, timeout_s=60)
    # learner 0 (passive) holds 10, learner 1 (active) 20: deltas (20-10)/2 and (10-20)/2
    assert out[0] == ([5.0] * 3, 1)
    assert out[1] == ([-5.0] * 3, 1)


@pytest.mark.cuda
def test_gpu_snapshot_and_add_round_trip():
    model = _model(0).cuda()
    staging = DeviceStaging(model)
    snapshot, ready = staging.snapshot(model)
    assert ready is not None and snapshot.is_cuda
    ready()  # the current stream waits for the gather
    assert torch.equal(snapshot.cpu(), flat_weights(model))
    staging.before_update()
    delta = staging.zeros(staging.numel) + 1.0
    staging.add(model, delta)
    torch.cuda.synchronize()
    assert torch.allclose(flat_weights(model), snapshot.cpu() + 1.0)
