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
