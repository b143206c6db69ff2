#!/usr/bin/env python3
"""Round schedule and outlier logic of `hpcval vet` on simulated partitions.

For 64 to 16,384 nodes (leaf switches of 16 nodes at 64, 32 above) each trial
injects, at once: two nodes 30 % slow (70 Mbit/s among 100), one node at a
tenth (100m among 1g), two slow links (half rate) among the measured pairs and
one switch whose uplink runs at half rate (hpcval.vet.simulate.inject). Noise
is drawn like the lab's (hpcval.vet.simulate). The schedule, the follow-up and
the judging are hpcval.vet.campaign.run, the code that runs on a cluster.

Prints one Markdown row per size: rounds, Slurm steps per vetting (one step per
per-node measurement over the whole allocation, one per round of pairs), the
steps one step per node and per pair would take, the estimated wall time, the
judging time (both verdicts of a vetting, the mean over the trials), the peak
memory of the process (simulation and judging, each size in a fresh process),
and how many injected faults were named / healthy nodes, links and switches
named (false alarms), summed over the trials.

Wall time is a model, not a measurement: ``--node-step-seconds`` per per-node
step (the 32-node lab: probe 4 s, triad 15 s, PingPong 15-23 s, docs/vet.md)
and ``--round-seconds`` per round (a 32-node lab round at 50 Mbit/s on 2 busy
cores: 22-38 s, including srun and MPI start-up). Not modelled: how MPI start-up of one world of
thousands of ranks grows with N, and a fabric that slows concurrent pairs.

    .venv/bin/python bench/vet_simulate.py [--trials 20] [--sizes 64,512,4096,16384]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

from hpcval.vet import campaign
from hpcval.vet.judge import JudgeSettings
from hpcval.vet.schedule import pair
from hpcval.vet.simulate import SimulatedFabric, cluster, inject

SWITCH = {64: 16}
#: per-node steps of hpcval vet: the probe, the triad (each node's task takes
#: its 5 samples one after the other) and the shared-memory PingPong (IMB -multi
#: 1, every node at once): one step each over the whole allocation
NODE_STEPS = 3
#: what the per-node phase took before, one step per node and sample (probe,
#: 5 triad, 5 PingPong): the "one step per node and pair" column
NODE_STEPS_PER_NODE_BEFORE = 1 + 5 + 5


def trials_for(n: int, trials: int) -> int:
    """Fewer trials at the largest sizes: a quarter at 4096, an eighth above."""
    if n < 4096:
        return trials
    return max(3, trials // 4 if n == 4096 else trials // 8)


def trial(n: int, rng: np.random.Generator, args: argparse.Namespace) -> dict:
    nodes, topo = cluster(n, SWITCH.get(n, 32))
    injected = inject(nodes, topo, rng, args.max_rounds)
    faults = injected.faults
    fabric = SimulatedFabric(nodes, topo, faults, noise=args.noise, dip_rate=args.dip_rate,
                             rng=rng)
    judging = [0.0]
    verdict_of = campaign.network_verdict

    def timed(*a: object, **kw: object) -> object:
        t0 = time.perf_counter()
        try:
            return verdict_of(*a, **kw)  # type: ignore[arg-type]
        finally:
            judging[0] += time.perf_counter() - t0

    campaign.network_verdict = timed  # type: ignore[assignment]
    try:
        camp, verdict = campaign.run(nodes, fabric.measure, JudgeSettings(),
                                     max_rounds=args.max_rounds, topology=topo,
                                     follow_up_rounds=args.follow_up)
    finally:
        campaign.network_verdict = verdict_of
    named_nodes = {c.name for c in verdict.culprits if c.kind == "node"}
    named_links = {pair(*c.name.split("<->")) for c in verdict.culprits if c.kind == "link"}
    named_sw = {c.name for c in verdict.culprits if c.kind == "switch"}
    slow_sw = injected.slow_switch
    in_sw = {x for x in nodes if topo[x] == slow_sw}
    bad = {*injected.slow30, injected.slow90}
    return {
        "rounds": len(camp.rounds), "follow": len(camp.follow_up_rounds),
        "pair_steps": camp.pairs_measured, "judging": judging[0],
        "slow30": len(named_nodes & set(injected.slow30)),
        "slow90": int(injected.slow90 in named_nodes),
        "links": len(named_links & set(faults.slow_links)), "switch": int(slow_sw in named_sw),
        "fp_nodes": len(named_nodes - bad - in_sw),
        "fp_links": len(named_links - set(faults.slow_links)),
        "fp_switch": len(named_sw - {slow_sw}),
    }


def one_size(n: int, args: argparse.Namespace) -> dict:
    """All trials of one size in this process; its peak memory with them."""
    rng = np.random.default_rng(args.seed + n)
    res = [trial(n, rng, args) for _ in range(trials_for(n, args.trials))]
    out = {k: sum(r[k] for r in res) for k in res[0]}
    out.update(
        n=n, trials=len(res), rounds=res[0]["rounds"],
        follow_min=min(r["follow"] for r in res), follow_max=max(r["follow"] for r in res),
        pair_steps_min=min(r["pair_steps"] for r in res),
        pair_steps_max=max(r["pair_steps"] for r in res),
        judging_mean=out["judging"] / len(res), judging_max=max(r["judging"] for r in res),
        peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def row(r: dict, args: argparse.Namespace) -> str:
    t, n = r["trials"], r["n"]
    rounds_min, rounds_max = r["rounds"] + r["follow_min"], r["rounds"] + r["follow_max"]
    steps = f"{NODE_STEPS + rounds_min}-{NODE_STEPS + rounds_max}"
    per_node = NODE_STEPS_PER_NODE_BEFORE * n
    before = f"{per_node + r['pair_steps_min']:,}-{per_node + r['pair_steps_max']:,}"
    node_phase = NODE_STEPS * args.node_step_seconds
    wall = f"{node_phase + rounds_min * args.round_seconds:.0f}-" \
           f"{node_phase + rounds_max * args.round_seconds:.0f} s"
    return (f"| {n:,} | {r['rounds']} (+{r['follow_min']}-{r['follow_max']}) | {steps} | "
            f"{before} | {wall} | {r['judging_mean']:.2f} s (max {r['judging_max']:.2f}) | "
            f"{r['peak_mib']:.0f} MiB | {r['slow30']}/{2 * t} | {r['slow90']}/{t} | "
            f"{r['links']}/{2 * t} | {r['switch']}/{t} | {r['fp_nodes']} | {r['fp_links']} | "
            f"{r['fp_switch']} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--max-rounds", type=int, default=7)
    ap.add_argument("--follow-up", type=int, default=2)
    ap.add_argument("--noise", type=float, default=0.15,
                    help="log-normal sigma of a sample (lab at 1g under load: 0.15; at 100m: "
                    "0.007)")
    ap.add_argument("--dip-rate", type=float, default=0.05)
    ap.add_argument("--round-seconds", type=float, default=30.0,
                    help="wall time of one round of pairs (32-node lab: 22-38 s)")
    ap.add_argument("--node-step-seconds", type=float, default=38 / 3,
                    help="wall time of one per-node step (32-node lab: 4 + 15 + 19 s)")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--sizes", default="64,512,4096,16384",
                    help="partition sizes (4096 runs a quarter of the trials, 16,384 an "
                    "eighth, at least 3)")
    ap.add_argument("--one-size", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_size:
        print(json.dumps(one_size(args.one_size, args)))
        return
    print(f"noise sigma {args.noise}, dip rate {args.dip_rate}, {args.trials} trials per size "
          f"(4096: a quarter, 16,384: an eighth), max {args.max_rounds} rounds + up to "
          f"{args.follow_up} follow-up rounds; {os.cpu_count()} CPUs, load before "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| nodes | rounds (+follow-up) | Slurm steps | steps at one per node and pair | "
          "est. wall time | judging time | peak memory | 30 % slow nodes named | "
          "90 % slow node named | slow links named | slow switch named | "
          "healthy nodes named | healthy links named | other switches named |")
    print("|" + "---|" * 14)
    for n in (int(x) for x in args.sizes.split(",")):
        # each size in a fresh process: its peak memory is that size's alone
        cmd = [sys.executable, __file__, "--one-size", str(n), *sys.argv[1:]]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        print(row(json.loads(out.strip().splitlines()[-1]), args), flush=True)
    print(f"\nload after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
