"""Ring schedules: bipartite, connected for every n, reproducible from the shared seed."""

from __future__ import annotations

import pytest

from asrdist.parallel.rules import rings


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("kind", ["fixed", "random"])
def test_every_exchange_joins_an_active_and_a_passive_learner(kind, n):
    for r in range(50):
        for a, p in rings.round_pairs(kind, n, r, seed=7):
            assert rings.is_active(a) and not rings.is_active(p) and 0 <= p < n


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7, 8])
@pytest.mark.parametrize("kind", ["fixed", "random"])
def test_the_exchange_graph_connects_every_learner(kind, n):
    seen = {0}
    edges = [pair for r in range(40) for pair in rings.round_pairs(kind, n, r, seed=3)]
    for _ in range(n):
        for a, p in edges:
            if a in seen or p in seen:
                seen |= {a, p}
    assert seen == set(range(n))


def test_fixed_ring_alternates_left_and_right():
    assert [rings.fixed_partner(3, 6, r) for r in range(4)] == [2, 4, 2, 4]
    assert [rings.fixed_partner(5, 6, r) for r in range(2)] == [4, 0]  # the ring closes
    assert [rings.fixed_partner(3, 5, r) for r in range(2)] == [2, 4]  # odd n: a path


def test_random_ring_is_a_function_of_seed_and_round():
    assert rings.random_ring(5, 11, 8) == rings.random_ring(5, 11, 8)
    assert sorted(rings.random_ring(5, 11, 8)) == list(range(8))
    assert len({tuple(rings.random_ring(5, r, 8)) for r in range(20)}) > 5
    assert rings.random_ring(5, 11, 8) != rings.random_ring(6, 11, 8)


def test_passive_learner_never_starts_an_exchange():
    with pytest.raises(ValueError):
        rings.partner("random", 2, 4, 0, 0)


@pytest.mark.parametrize("n", [5, 8, 16])
def test_random_ring_mixes_faster_than_fixed(n):
    # (at n = 4 the alternating fixed ring already meets both neighbours: no gain possible)
    assert rings.expected_mixing_gap("random", n, 200) > 2 * rings.expected_mixing_gap("fixed", n)


def test_a_ring_after_a_departure_keeps_every_role_it_can():
    # roles by position: even passive, odd active. Losing active 5 of 8: passives 0 2 4 6,
    # actives 1 3 7 interleave and nobody changes role (numbered in order, 6 and 7 would flip)
    assert rings.keeping_roles(list(range(8)), set()) == list(range(8))
    assert rings.keeping_roles(list(range(8)), {5}) == [0, 1, 2, 3, 4, 7, 6]
    # losing passive 4: passives 0 2 6 run out at position 6, which active 7 takes (one flip)
    assert rings.keeping_roles(list(range(8)), {4}) == [0, 1, 2, 3, 6, 5, 7]
    # hadpsgd's leaders of 4 nodes of 4: node 1 (leader 4) leaves; 8 stays passive, 12 active
    assert rings.keeping_roles([0, 4, 8, 12], {4}) == [0, 12, 8]
    assert rings.keeping_roles([0, 1, 2], {0, 1, 2}) == []
