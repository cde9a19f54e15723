"""The exchange on vectors made once, on CPU (the same code as on a GPU, whose streams are then
no-ops; the CUDA ordering itself is not run here): the passive book's arithmetic equals the
old host arithmetic bit for bit, two real learners reuse the same vectors across exchanges
with exactly opposite deltas, and hadpsgd's node sync shares a zero count with no host read."""

from __future__ import annotations

import random

import pytest
import torch
import torch.distributed as dist

from asrdist.parallel.processes.exchange import PairwiseExchange, make_exchange_group
from asrdist.parallel.rules.staging import DeviceStaging, Link, lane
from asrdist.parallel.rules.update import PassiveBook, half_difference_
from asrdist.parallel.rules.weights import flat_weights
from asrdist.parallel.strategies.hadpsgd import HADPSGD, HADPSGDOptions
from asrdist.parallel.strategy import Learner
from asrdist.testing.learners import launch
from tests.parallel.conftest import ok, run_learners


class OldBook:
    """The passive book as it was (commit 99b4986): a fresh vector for every sum."""

    def __init__(self, weights: torch.Tensor) -> None:
        self.served, self.pending, self.count = weights, torch.zeros_like(weights), 0

    def current(self) -> torch.Tensor:
        return self.served + self.pending

    def receive(self, delta: torch.Tensor) -> None:
        self.pending.add_(delta)
        self.count += 1

    def take(self) -> tuple[torch.Tensor | None, int]:
        if self.count == 0:
            return None, 0
        delta, count = self.pending, self.count
        self.served = self.served + delta
        self.pending, self.count = torch.zeros_like(delta), 0
        return delta, count


def test_passive_book_equals_the_old_arithmetic_bit_for_bit():
    """Random publishes, serves and takes; the new book reuses its vectors and writes into
    what it is given (so it gets its own copies), the old one allocates."""
    rng = random.Random(0)
    gen = torch.Generator().manual_seed(0)
    weights = torch.randn(1000, generator=gen)
    new, old = PassiveBook(weights.clone()), OldBook(weights.clone())
    mine, theirs = torch.empty(1000), torch.empty(1000)
    taken_ptrs = set()
    for step in range(300):
        op = rng.choice(["publish", "serve", "serve", "take"])
        if op == "publish":
            w = torch.randn(1000, generator=gen)
            new.publish(w.clone())
            old.served = w.clone()
        elif op == "serve":
            active = torch.randn(1000, generator=gen)
            new.current_into(mine)
            assert torch.equal(mine, old.current()), step
            theirs.copy_(active)
            new.receive(half_difference_(theirs, mine))
            old.receive(half_difference_(active.clone(), old.current()))
        else:
            (d_new, c_new), (d_old, c_old) = new.take(), old.take()
            assert c_new == c_old, step
            assert (d_new is None) == (d_old is None), step
            if d_new is not None:
                assert torch.equal(d_new, d_old), step
                taken_ptrs.add(d_new.data_ptr())
    assert len(taken_ptrs) == 2  # two pending vectors, in turn


def test_link_and_lane_on_cpu_are_the_vectors_themselves():
    """On CPU gloo reads and writes the exchange's own vectors: no copies, no events."""
    cpu = lane(torch.device("cpu"))
    link = Link(torch.device("cpu"), 4)
    v = torch.arange(4.0)
    assert link.outgoing(v) is v and link.inbox(v) is v
    link.land(v)
    assert cpu.mark() is None and torch.equal(v, torch.arange(4.0))


STEPS = 5


def _learner(rank: int, n: int, device: str) -> tuple:
    """Learner 1 (active) and 0 (passive), one exchange per step, in lock step; each reports
    its snapshots, deltas and the vectors they lived in."""
    torch.manual_seed(rank)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(),
                                torch.nn.Linear(6, 2)).to(device)
    staging = DeviceStaging(model)
    group = make_exchange_group([0, 1], 30)
    weights, ready = staging.snapshot(model)
    eng = PairwiseExchange(group=group, ranks=[0, 1], index=rank, weights=weights, ready=ready,
                           alloc=staging.zeros, partner_of=lambda r: 0, timeout_s=30, rank=rank)
    start = flat_weights(model)
    seen = []
    for _ in range(STEPS):
        dist.barrier()
        snapshot, ready = staging.snapshot(model)
        staging.before_update()  # the compute stream (this clone, the merge) after the gather
        kept = snapshot.cpu()
        if eng.active:
            eng.start(snapshot, ready)
            delta = eng.wait()
        else:
            eng.publish(snapshot, ready)
            delta, count = eng.take_pending()
            while delta is None:
                delta, count = eng.take_pending()
            assert count == 1
        seen.append((kept, delta.cpu(), snapshot.data_ptr(), delta.data_ptr()))
        staging.add(model, delta)
    eng.finish()
    return start, flat_weights(model), seen


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_two_learners_reuse_their_vectors_and_swap_exact_negatives(device):
    """On CPU; with CUDA also on the GPU (streams, events, the pinned pair), both learners on
    one device (spawned: a forked child cannot start CUDA once the parent has)."""
    out = launch(_learner, 2, device, timeout_s=60, start="fork" if device == "cpu" else "spawn")
    (p_start, p_end, passive), (a_start, a_end, active) = out[0], out[1]
    for k in range(STEPS):
        a_snap, a_delta, _, _ = active[k]
        p_snap, p_delta, _, _ = passive[k]
        # the old host arithmetic, on the weights each side had: bit for bit
        assert torch.equal(a_delta, half_difference_(p_snap.clone(), a_snap)), k
        assert torch.equal(p_delta, -a_delta), k
    assert len({s[2] for s in active}) == len({s[2] for s in passive}) == 2  # double buffers
    assert len({s[3] for s in active}) == 1  # the active's delta: its receive vector
    assert len({s[3] for s in passive}) == 2  # the passive's: two pending vectors in turn
    torch.testing.assert_close(a_end + p_end, a_start + p_start, rtol=0, atol=1e-6)
    torch.testing.assert_close(a_end, p_end, rtol=0, atol=1e-6)  # one average: consensus


class _Node:
    """A node of two learners' broadcast: the leader's vector lands in the other's."""

    def __init__(self) -> None:
        self.sent: torch.Tensor | None = None

    def broadcast_(self, tensor: torch.Tensor, src: int, group: object = None) -> None:
        if self.sent is None:
            self.sent = tensor.clone()
        else:
            tensor.copy_(self.sent)
            self.sent = None


def _member(rank: int, node: _Node, model: torch.nn.Module) -> HADPSGD:
    s = HADPSGD(Learner(rank, 2, transport=node), HADPSGDOptions(learners_per_node=2))
    s.nodes, s._nodes_found = [[0, 1]], True
    s.staging = DeviceStaging(model)
    return s


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_hadpsgd_node_sync_shares_delta_and_count_in_one_vector(monkeypatch, device):
    """A zero count arrives as a zero delta, which the member adds like any other; the count
    is never read back with ``.item()`` (on a GPU it stays a tensor on the device)."""
    model = torch.nn.Linear(3, 2).to(device)
    node = _Node()
    leader, member = _member(0, node, model), _member(1, node, model)
    with monkeypatch.context() as patch:
        patch.setattr(torch.Tensor, "item", lambda self: pytest.fail(".item() called"))
        assert leader._sync_node(model, None, 0) == (None, 0)
        zero, none = member._sync_node(model, None, 0)
        zeros = torch.equal(zero, torch.zeros(8, device=device))  # its vector is reused next
        sent = torch.arange(8.0, device=device)
        assert leader._sync_node(model, sent, 3)[1] == 3
        delta, count = member._sync_node(model, None, 0)
    assert isinstance(count, torch.Tensor) == (device == "cuda")
    assert int(none) == 0 and zeros
    assert int(count) == 3 and torch.equal(delta, sent)


def test_hadpsgd_one_node_syncs_zero_counts_every_step(tmp_path):
    """One node of two: a ring of one leader, so every step's sync carries nothing; the
    learners stay identical and count no merge."""
    sc = {"algo": "hadpsgd", "lr": 0.05, "steps": 6, "options": {"learners_per_node": 2}}
    res = ok(run_learners(sc, 2, tmp_path))
    assert torch.equal(res[0]["before"], res[1]["before"])
    assert [r["metrics"]["merged"] for r in res] == [0, 0]
    assert [r["state"]["merged"] for r in res] == [0, 0]


class _Times:
    """The transport's side of the metrics: what staleness it was told."""

    def __init__(self) -> None:
        self.staleness: list[int] = []

    def note_staleness(self, value: int) -> None:
        self.staleness.append(value)

    def metrics(self) -> dict:
        return {"staleness": self.staleness}


def test_counts_on_the_device_are_read_back_only_at_metrics():
    """A member's merge count from the node's vector stays a tensor (on a GPU, on the device)
    through the step; its staleness and count are read back when the metrics are asked."""
    times = _Times()
    s = HADPSGD(Learner(1, 4, transport=times), HADPSGDOptions(learners_per_node=2))
    rule = s._staleness_rule
    for got in (torch.tensor(2), torch.tensor(0)):
        rule.snapshot(s.merged)
        s.merged = s.merged + got
        stale = rule.at_apply(s.merged)
        assert isinstance(stale, torch.Tensor)
        s._stale_on_device.append(stale)
    assert times.staleness == []
    out = s.metrics()
    assert out["staleness"] == [2, 0] and out["merged"] == 2 and s.state_dict()["merged"] == 2
