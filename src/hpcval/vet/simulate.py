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


def simulated_result(n: int, seed: int = 1, per_switch: int = 32, noise: float = 0.15,
                     dip_rate: float = 0.05) -> dict:
    """A whole vetting of a simulated partition as ``hpcval vet`` stores it
    (``vet.json``): the network campaign with :func:`inject`'s faults, and per-node
    triad, shared-memory PingPong and CPU frequency samples (log-normal noise
    of 5 %), judged by the same code. For the report's
    tests and bench/vet_report.py; the wall time is the one bench/vet_simulate.py
    models."""
    from hpcval.vet import campaign
    from hpcval.vet.judge import FIGURES, INFORMATIONAL, JudgeSettings, judge_node_figure

    rng = np.random.default_rng(seed)
    nodes, topo = cluster(n, per_switch)
    injected = inject(nodes, topo, rng)
    fabric = SimulatedFabric(nodes, topo, injected.faults, noise=noise, dip_rate=dip_rate,
                             rng=rng)
    settings = JudgeSettings()
    camp, verdict = campaign.run(nodes, fabric.measure, settings, max_rounds=7, topology=topo)
    node_samples: dict[str, dict[str, list[float]]] = {}
    for fig, typical in (("triad_bw", 20_000.0), ("shm_pingpong_bw_1MiB", 9_000.0),
                         ("shm_pingpong_lat_8B", 0.4), ("cpu_mhz", 2_600.0)):
        draws = typical * np.exp(rng.normal(0.0, 0.05, (n, 5)))
        node_samples[fig] = {x: [float(v) for v in row] for x, row in zip(nodes, draws,
                                                                           strict=True)}
        judge_node_figure(node_samples[fig], FIGURES[fig], settings, verdict,
                          judged=fig not in INFORMATIONAL)
    rounds = len(camp.rounds) + len(camp.follow_up_rounds)
    return {
        "id": f"simulated-{n}-{seed}", "site": "simulated", "partition": f"sim{n}",
        "rounds": len(camp.rounds), "follow_up_rounds": len(camp.follow_up_rounds),
        "jobs": 1, "steps": 11 + rounds, "wall_seconds": 15.0 + 6.5 * rounds,
        "topology": topo, "verdict": verdict.to_dict(), "failures": [], "unmeasured": [],
        "pair_samples": {f"{a}|{b}": s for (a, b), s in camp.samples.items()},
        "node_samples": node_samples,
        "injected": {"slow30": injected.slow30, "slow90": injected.slow90,
                     "slow_switch": injected.slow_switch,
                     "slow_links": [f"{a}<->{b}" for a, b in injected.faults.slow_links]},
    }
