"""The simulator's transport: it knows no strategy, and its collectives meet as
torch.distributed's do (the k-th call on a group by each member), costed by the speed model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from asrdist.parallel import registry
from asrdist.simulate.coroutine import Coroutine
from asrdist.simulate.speed import SpeedModel
from asrdist.simulate.transport import SimTransport
from asrdist.simulate.world import SimLearner, World
from tests.parallel import test_toy_strategy  # noqa: F401 - registers the plugin strategy

PACKAGE = Path(__file__).resolve().parents[2] / "asrdist" / "simulate"


def test_the_simulator_names_no_strategy():
    """Every registered name (the plugin's included) and its family (``adpsgd`` of
    ``adpsgd-fixed``), as a word, anywhere in the package's files."""
    names = set(registry.algo_names())
    names |= {n.split("-")[0] for n in names}
    assert {"ssgd", "ma", "bmuf", "diloco", "hadpsgd", "adpsgd", "toy-average"} <= names
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])",
                         re.IGNORECASE)
    found = [f"{f.name}:{n + 1}: {line.strip()}"
             for f in sorted(PACKAGE.glob("*.py"))
             for n, line in enumerate(f.read_text().splitlines()) if pattern.search(line)]
    assert found == []


def _run(n: int, program, speed: SpeedModel | None = None) -> World:
    """``program(comm)`` on ``n`` learners of a one-weight model."""
    world = World([SimLearner(i, torch.nn.Linear(1, 1, bias=False)) for i in range(n)],
                  speed or SpeedModel(), lambda i, k, m: m.weight.sum())
    for i in range(n):
        comm = SimTransport(world, i)
        comm.turn = Coroutine(lambda turn, comm=comm: program(comm), f"test-{i}")
        world.clock.spawn(i, comm.turn.process())
    world.clock.run()
    return world


def test_collectives_match_by_call_order_and_cost_the_speed_model():
    seen = {}

    def program(comm: SimTransport) -> None:
        comm.sleep(1.0 + comm.rank)  # learner 2 arrives last, at 3 s
        x = torch.tensor([float(comm.rank)])
        comm.average_([x])  # 3 learners, 4 bytes: 2 * 2 latencies
        seen[comm.rank, "mean"] = (x.item(), comm.world.clock.now)
        y = torch.tensor([10.0 * comm.rank])
        comm.broadcast_(y, 2)  # one message
        seen[comm.rank, "bcast"] = (y.item(), comm.world.clock.now)
        seen[comm.rank, "any"] = comm.any_(comm.rank == 1)

    world = _run(3, program, SpeedModel(latency_s=0.25))
    for r in range(3):
        assert seen[r, "mean"] == (1.0, 4.0)
        assert seen[r, "bcast"] == (20.0, 4.25)
        assert seen[r, "any"] is True
    assert world.clock.now == 5.25
    assert world.clock.waited == {0: 2 + 1 + 0.25 + 1, 1: 1 + 1 + 0.25 + 1, 2: 1 + 0.25 + 1}


def test_a_learner_that_fails_ends_the_run_with_its_error_and_the_others_are_let_go():
    turns = []

    def program(comm: SimTransport) -> None:
        turns.append(comm.turn)
        if comm.rank == 1:
            raise ValueError("bad shard")
        comm.wait_all_finished()  # never held: learner 1 is gone

    with pytest.raises(ValueError, match="bad shard"):
        _run(3, program)
    for turn in turns:
        turn.cancel()
        assert not turn._thread.is_alive()


def test_a_node_s_ring_runs_at_the_node_link_and_the_bytes_are_counted_by_link():
    """Two nodes of 2: a node's average pays 2 node latencies, the average of all 6 steps of
    the cross-node latency; 4-byte tensors, every member sending 2 (n-1)/n of them to the
    next (the hops 1->2 and 3->0 cross nodes)."""
    times = {}

    def program(comm: SimTransport) -> None:
        node = (0, 1) if comm.rank < 2 else (2, 3)
        comm.average_([torch.tensor([1.0])], node)
        times[comm.rank, "node"] = comm.world.clock.now
        comm.average_all_([torch.tensor([1.0])])
        times[comm.rank, "all"] = comm.world.clock.now

    world = _run(4, program, SpeedModel(latency_s=1.0, node_latency_s=0.1, node_size=2))
    assert [times[r, "node"] for r in range(4)] == pytest.approx([0.2] * 4)
    assert [times[r, "all"] for r in range(4)] == pytest.approx([6.2] * 4)
    assert world.wire == {"node": 2 * 2 * 4 + 2 * 6, "cross": 2 * 6}
    assert SimTransport(world, 0).node_names() == ["node0", "node0", "node1", "node1"]
    assert SimTransport(_run(2, lambda comm: None), 0).node_names() is None
