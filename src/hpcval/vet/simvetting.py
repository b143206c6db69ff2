"""A whole simulated vetting on dependent samples: the path a user runs.

A node's samples within one step are not independent draws: taken back to back
by the same processes, they share that moment's scheduling luck. So are a
pair's. Here each node's (and each pair's) samples within one measurement
share a random **offset**, a log-normal factor drawn once for the node (pair)
and step, times the per-sample noise; the step that measures a node again (the
confirmation) draws a fresh offset. Sizes, from the recorded 16-node lab
vetting with no fault on the shared-memory figure (tests/data/vet/
shm-dips-16nodes.json, docs/vet.md "Scale: simulation"): shared-memory
PingPong, robust log-sd of the samples within a node 0.11 and of the nodes'
medians 0.17, so an offset of log-sd 0.16 (0.17^2 - 1.57 x 0.11^2 / 5); and
there 3 of 16 nodes fell whole to 15-30 % of their peers, which
``node_dip_rate`` models (a node's whole step at that moment).

The path is the one ``hpcval vet`` runs: :func:`hpcval.vet.campaign.run` (the
planned rounds of pairs, judging, follow-up rounds, judging again), then
:func:`hpcval.vet.run.judge_nodes` on the per-node figures, once without the
confirmation (the first measurement alone) and once with it:
:func:`hpcval.vet.confirm.suspects`, then :func:`hpcval.vet.confirm.again_loop`
(the suspects measured again beside controls, as many times as
:func:`hpcval.vet.confirm.needed` says), judged by
:func:`hpcval.vet.confirm.judge_again` inside ``judge_nodes``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from hpcval.vet import campaign, confirm
from hpcval.vet.judge import JudgeSettings, Verdict
from hpcval.vet.measure import NodeSamples
from hpcval.vet.planning import Options
from hpcval.vet.run import judge_nodes
from hpcval.vet.schedule import Pair, pair, plan
from hpcval.vet.simulate import Faults, SimulatedFabric, cluster

#: per-node figures simulated: typical value, within-node log-sd, node offset log-sd
#: (shared-memory PingPong: the 16-node lab; triad: its nodes' medians spread no
#: more than their samples predict, so a small offset)
NODE_FIGURES = {"shm_pingpong_bw_1MiB": (470.0, 0.11, 0.16), "triad_bw": (20_000.0, 0.17, 0.05)}
#: a slow node: its link at 70 % and its shared-memory bandwidth at 35 %
SLOW_LINK_RATE = 0.7
SLOW_SHM = 0.35
#: steps measuring per-node suspects again (``hpcval vet --confirm``'s default)
CONFIRM_STEPS = Options().confirm


@dataclass
class DependentFabric(SimulatedFabric):
    """Pairs whose 5 samples share an offset drawn per pair and measurement."""

    offset: float = 0.03

    def draw(self, p: Pair) -> list[float]:
        shared = float(np.exp(self.rng.normal(0.0, self.offset)))
        return [v * shared for v in super().draw(p)]


@dataclass
class NodeModel:
    offset_scale: float = 1.0      # times each figure's offset log-sd
    node_dip_rate: float = 0.0     # a node's whole step at 15-30 % of its peers
    samples: int = 5

    def draw(self, nodes: list[str], fig: str, slow: dict[str, float],
             rng: np.random.Generator) -> dict[str, list[float]]:
        typical, within, offset = NODE_FIGURES[fig]
        n = len(nodes)
        shared = rng.normal(0.0, offset * self.offset_scale, n)
        dips = rng.random(n) < self.node_dip_rate
        shared[dips] += np.log(rng.uniform(0.15, 0.3, int(dips.sum())))
        vals = typical * np.exp(shared[:, None] + rng.normal(0.0, within, (n, self.samples)))
        if fig == "shm_pingpong_bw_1MiB":
            for i, x in enumerate(nodes):
                vals[i] *= slow.get(x, 1.0)
        return {x: [float(v) for v in row] for x, row in zip(nodes, vals, strict=True)}


@dataclass
class Outcome:
    """What one vetting named: nodes and links, healthy ones counted apart."""

    slow_nodes: list[str]
    slow_links: list[Pair]
    named: dict[str, set[str]] = field(default_factory=dict)   # "first"/"confirmed"
    links: dict[str, set[Pair]] = field(default_factory=dict)
    #: "first"/"confirmed" -> (kind, name, figure) of every culprit
    culprits: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    suspects: int = 0
    judging: float = 0.0   # seconds: the network verdicts and both per-node judgings

    def healthy_named(self, how: str) -> int:
        return len(self.named[how] - set(self.slow_nodes))

    def healthy_links(self, how: str) -> int:
        return len(self.links[how] - set(self.slow_links))

    def faults_named(self, how: str) -> int:
        return len(self.named[how] & set(self.slow_nodes)) + \
            len(self.links[how] & set(self.slow_links))


def vetting(n: int, rng: np.random.Generator, slow_nodes: int = 1, slow_links: int = 1,
            model: NodeModel | None = None, pair_offset: float = 0.03, noise: float = 0.15,
            dip_rate: float = 0.05, max_rounds: int = 7, per_switch: int = 32) -> Outcome:
    """One vetting of ``n`` simulated nodes with ``slow_nodes`` slow nodes (link at
    70 %, shared-memory bandwidth at half) and ``slow_links`` links at half rate."""
    model = model or NodeModel()
    settings = JudgeSettings()
    nodes, topo = cluster(n, per_switch)
    bad = [str(x) for x in rng.choice(nodes, slow_nodes, replace=False)]
    faults = Faults(slow_nodes={x: SLOW_LINK_RATE for x in bad})
    planned = [p for rnd in plan(nodes, max_rounds) for p in rnd if not set(p) & set(bad)]
    for i in rng.choice(len(planned), slow_links, replace=False):
        faults.slow_links[planned[int(i)]] = 0.5
    fabric = DependentFabric(nodes, topo, faults, noise=noise, dip_rate=dip_rate, rng=rng,
                             offset=pair_offset)
    out = Outcome(bad, list(faults.slow_links))
    slow_shm = {x: SLOW_SHM for x in bad}
    t0 = time.perf_counter()
    _, net = campaign.run(nodes, fabric.measure, settings, max_rounds=max_rounds,
                          topology=topo)
    out.judging += time.perf_counter() - t0
    figures = {fig: model.draw(nodes, fig, slow_shm, rng) for fig in NODE_FIGURES}
    for how in ("first", "confirmed"):
        verdict = Verdict(nodes=list(nodes), culprits=list(net.culprits))
        t0 = time.perf_counter()
        confirmed = None
        if how == "confirmed":
            wanted = confirm.suspects(figures, nodes, settings)
            out.judging += time.perf_counter() - t0
            # the measurements again: suspects and controls in one step, fresh offsets,
            # as many as confirm.again_loop decides (the lab's default budget of steps)

            def step(fig: str, hosts: list[str], _j: int) -> tuple[dict[str, list[float]],
                                                                   dict[str, str]]:
                return model.draw(hosts, fig, slow_shm, rng), {}
            confirmed = confirm.again_loop(nodes, wanted, step, CONFIRM_STEPS, set(), settings)
            out.suspects += sum(len(s) for s in wanted.values())
            t0 = time.perf_counter()
        judge_nodes(verdict, NodeSamples(figures=figures), settings, {}, confirmed)
        out.judging += time.perf_counter() - t0
        out.named[how] = {x for c in verdict.culprits if c.kind in ("node", "switch")
                          for x in (c.nodes or [c.name])}
        out.culprits[how] = [(c.kind, c.name, c.figure) for c in verdict.culprits]
        out.links[how] = {pair(*c.name.split("<->")) for c in verdict.culprits
                          if c.kind == "link"}
    return out
