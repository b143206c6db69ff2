"""Round schedules of `hpcval vet`: disjoint pairs, every pair once, follow-up packing."""

from __future__ import annotations

from itertools import combinations

import pytest

from hpcval.vet.schedule import follow_up, pack, pair, plan, tournament


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 33])
def test_tournament_covers_every_pair_once_in_disjoint_rounds(n: int) -> None:
    nodes = [f"n{i}" for i in range(n)]
    rounds = tournament(nodes)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    seen = [p for rnd in rounds for p in rnd]
    assert sorted(seen) == sorted(pair(a, b) for a, b in combinations(nodes, 2))
    for rnd in rounds:
        ends = [x for p in rnd for x in p]
        assert len(ends) == len(set(ends)), rnd


def test_plan_caps_rounds_and_spreads_peers_over_the_list() -> None:
    nodes = [f"n{i:03d}" for i in range(256)]
    rounds = plan(nodes, max_rounds=7)
    assert len(rounds) == 7 and all(len(r) == 128 for r in rounds)
    peers: dict[str, set[str]] = {n: set() for n in nodes}
    for a, b in (p for r in rounds for p in r):
        peers[a].add(b)
        peers[b].add(a)
    assert all(len(p) == 7 for p in peers.values())
    # peers of the first 32 nodes (one "switch") are not all from one stretch of the list
    first = {int(b[1:]) // 32 for n in nodes[:32] for b in peers[n]}
    assert len(first) >= 6
    assert plan(nodes, 7) == rounds  # the same partition gets the same plan


def test_pack_and_follow_up() -> None:
    assert pack([("a", "b"), ("b", "c"), ("c", "d"), ("a", "d")]) == [
        [("a", "b"), ("c", "d")], [("b", "c"), ("a", "d")]]
    rounds = follow_up([("a", "b")], ["x"], healthy=["c", "d", "e"],
                       measured={("a", "c")}, per_node=2)
    flat = [p for r in rounds for p in r]
    assert ("a", "b") in flat  # the suspect pair again
    assert ("a", "c") not in flat  # with fresh peers only
    assert sum(1 for p in flat if "x" in p) == 2
    for rnd in rounds:
        ends = [x for p in rnd for x in p]
        assert len(ends) == len(set(ends))
