"""Which node pairs run together: rounds of disjoint pairs.

A round is a set of pairs in which no node appears twice, so all pairs of a
round run at once, each on its own two nodes, and a round takes as long as its
slowest pair. :func:`tournament` is the circle method of a round-robin
tournament: N-1 rounds (N rounds for odd N, one node sitting out each round)
cover every pair exactly once. :func:`plan` takes the first ``max_rounds`` of
those rounds: every node then meets ``max_rounds`` different peers, which is
what the judging needs (a node low with all its peers is the node, a single
low pair is the link); wall time stops growing with N once N-1 exceeds
``max_rounds``. :func:`follow_up` packs re-measurements of suspect pairs, and
pairs of suspect nodes with fresh healthy peers, into as few rounds as it can.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable, Sequence

Pair = tuple[str, str]


def pair(a: str, b: str) -> Pair:
    """A pair in canonical order, so (a, b) and (b, a) are one key."""
    return (a, b) if a <= b else (b, a)


def tournament(nodes: Sequence[str], rounds: int | None = None) -> list[list[Pair]]:
    """All pairs of ``nodes`` in rounds of disjoint pairs (circle method); with
    ``rounds``, only the first that many (round r is built directly, so the
    first 7 rounds of 16,384 nodes cost 7 rounds, not the whole tournament)."""
    players: list[str | None] = list(nodes)
    if len(players) < 2:
        return []
    if len(players) % 2:
        players.append(None)  # a bye: whoever meets it sits the round out
    n = len(players)
    first, rest = players[0], players[1:]
    out = []
    for r in range(n - 1 if rounds is None else min(rounds, n - 1)):
        # the first player fixed, the others rotated by r (one step per round)
        shift = r % (n - 1)
        order = [first, *rest[len(rest) - shift:], *rest[:len(rest) - shift]]
        rnd = []
        for i in range(n // 2):
            a, b = order[i], order[n - 1 - i]
            if a is not None and b is not None:
                rnd.append(pair(a, b))
        out.append(rnd)
    return out


def plan(nodes: Sequence[str], max_rounds: int | None = None) -> list[list[Pair]]:
    """The first ``max_rounds`` rounds of the tournament (all of them if None).

    The nodes are put in a fixed pseudo-random order first (seeded by the node
    names, so the same partition gets the same plan): in the circle method's
    first rounds a node meets peers from one contiguous stretch of the list, and
    with nodes listed by switch that would pair a node mostly with one switch.
    """
    order = sorted(nodes, key=lambda n: hashlib.sha256(n.encode()).hexdigest())
    return tournament(order, max_rounds)


def pack(pairs: Iterable[Pair]) -> list[list[Pair]]:
    """Greedy packing of ``pairs`` into rounds of disjoint pairs, in order."""
    rounds: list[tuple[list[Pair], set[str]]] = []
    for p in pairs:
        for rnd, busy in rounds:
            if p[0] not in busy and p[1] not in busy:
                rnd.append(p)
                busy.update(p)
                break
        else:
            rounds.append(([p], {p[0], p[1]}))
    return [rnd for rnd, _ in rounds]


def follow_up(suspect_pairs: Iterable[Pair], suspect_nodes: Iterable[str],
              healthy: Sequence[str], measured: set[Pair], per_node: int = 2,
              max_rounds: int = 3, orphans: Sequence[str] = ()) -> list[list[Pair]]:
    """Rounds that re-measure ``suspect_pairs`` and pair every end of a suspect pair
    (and every suspect node) with ``per_node`` healthy peers it has not met yet;
    then every one of ``orphans`` (a node whose planned peer was lost during the
    vetting) with one healthy peer it has not met.

    A low pair that is low again, while both its ends are fine with fresh peers,
    is the link; an end that is low with the fresh peers too is the node.
    """
    wanted: list[Pair] = []
    seen: set[Pair] = set()

    def add(p: Pair) -> None:
        if p not in seen:
            seen.add(p)
            wanted.append(p)

    ends: list[str] = []
    for p in suspect_pairs:
        add(p)
        ends += [e for e in p if e not in ends]
    ends += [n for n in suspect_nodes if n not in ends]
    load: dict[str, int] = {h: 0 for h in healthy}
    for end in ends:
        fresh = [h for h in healthy if h != end and pair(end, h) not in measured
                 and pair(end, h) not in seen]
        # spread the extra work over the healthy nodes (the least loaded first;
        # nsmallest is sorted(...)[:per_node], without sorting all of them)
        for h in heapq.nsmallest(per_node, fresh, key=lambda h: load[h]):
            load[h] += 1
            add(pair(end, h))
    for end in orphans:
        fresh = [h for h in healthy if h != end and pair(end, h) not in measured
                 and pair(end, h) not in seen]
        for h in heapq.nsmallest(1, fresh, key=lambda h: load[h]):
            load[h] += 1
            add(pair(end, h))
    return pack(wanted)[:max_rounds]
