"""Simulated partitions: pair bandwidths drawn like the lab's, with known faults.

A pair's bandwidth is the slower of its two nodes' link rates, times the
factor of a slow link between them, times the factor of a slow switch uplink
when the pair leaves that switch. Each sample carries multiplicative noise
(log-normal, ``noise`` = its sigma) and, with probability ``dip_rate``, a dip
to 30-80 % (a sample that met other work on the machine). ``noise`` and
``dip_rate`` default to the noisier of the lab's two regimes (docs/vet.md):
1g links on 2 shared cores at load 10-14, where the CPU, not the link, limits
a pair (robust log-sd of a pair's samples 0.15, pair medians spread 16 %); at
100m the link limits and the samples' log-sd is 0.007.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hpcval.vet.schedule import Pair


@dataclass
class Faults:
    slow_nodes: dict[str, float] = field(default_factory=dict)
    slow_links: dict[Pair, float] = field(default_factory=dict)
    slow_switches: dict[str, float] = field(default_factory=dict)


@dataclass
class SimulatedFabric:
    nodes: list[str]
    topology: dict[str, str]
    faults: Faults
    rate: float = 117.0
    noise: float = 0.15
    dip_rate: float = 0.05
    samples: int = 5
    rng: np.random.Generator = field(default_factory=np.random.default_rng)

    def true_value(self, p: Pair) -> float:
        a, b = p
        f = self.faults
        v = self.rate * min(f.slow_nodes.get(a, 1.0), f.slow_nodes.get(b, 1.0))
        v *= f.slow_links.get(p, 1.0)
        sa, sb = self.topology.get(a), self.topology.get(b)
        if sa != sb:
            v *= min(f.slow_switches.get(sa or "", 1.0), f.slow_switches.get(sb or "", 1.0))
        return v

    def draw(self, p: Pair) -> list[float]:
        v = self.true_value(p) * np.exp(self.rng.normal(0.0, self.noise, self.samples))
        dips = self.rng.random(self.samples) < self.dip_rate
        v[dips] *= self.rng.uniform(0.3, 0.8, int(dips.sum()))
        return [float(x) for x in v]

    def measure(self, _round: int, pairs: list[Pair]) -> dict[Pair, list[float]]:
        return {p: self.draw(p) for p in pairs}


def cluster(n: int, per_switch: int) -> tuple[list[str], dict[str, str]]:
    """Node names ``n0001``... and a switch per ``per_switch`` consecutive nodes."""
    width = len(str(n))
    nodes = [f"n{i:0{width}d}" for i in range(1, n + 1)]
    return nodes, {node: f"sw{i // per_switch + 1:03d}" for i, node in enumerate(nodes)}


@dataclass
class Injected:
    """The faults of one simulated trial, as ``bench/vet_simulate.py`` injects them."""

    faults: Faults
    slow30: list[str]
    slow90: str
    slow_switch: str


def inject(nodes: list[str], topology: dict[str, str], rng: np.random.Generator,
           max_rounds: int | None = 7) -> Injected:
    """Two nodes 30 % slow (0.7), one at a tenth (0.1), all outside one switch
    whose uplink runs at half rate, and two slow links (half rate) among the
    planned pairs of healthy nodes outside that switch."""
    from hpcval.vet.schedule import plan

    switches = sorted(set(topology.values()))
    slow_sw = str(rng.choice(switches))
    outside = [x for x in nodes if topology[x] != slow_sw]
    picked = [str(x) for x in rng.choice(outside, 3, replace=False)]
    faults = Faults(slow_nodes={picked[0]: 0.7, picked[1]: 0.7, picked[2]: 0.1},
                    slow_switches={slow_sw: 0.5})
    planned = [p for rnd in plan(nodes, max_rounds) for p in rnd]
    bad = set(picked)
    candidates = [p for p in planned if not (set(p) & bad) and topology[p[0]] != slow_sw
                  and topology[p[1]] != slow_sw]
    for i in rng.choice(len(candidates), 2, replace=False):
        faults.slow_links[candidates[int(i)]] = 0.5
    return Injected(faults, picked[:2], picked[2], slow_sw)
