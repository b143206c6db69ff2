#!/usr/bin/env python3
"""Round schedule and outlier logic of `hpcval vet` on simulated partitions.

For 64, 512 and 4096 nodes (switches of 16/32/32 nodes) each trial injects, at
once: two nodes 30 % slow (70 Mbit/s among 100), one node at a tenth (100m among
1g), two slow links (half rate) among the measured pairs and one switch whose
uplink runs at half rate. Noise is drawn like the lab's (hpcval.vet.simulate).
Prints one Markdown table row per size: rounds, srun steps, jobs, estimated
wall time, and how many injected faults were named / how many healthy nodes
and links were named (false alarms), summed over the trials.

    .venv/bin/python bench/vet_simulate.py [--trials 20] [--round-seconds 6.5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hpcval.vet import campaign
from hpcval.vet.judge import JudgeSettings
from hpcval.vet.schedule import pair, plan
from hpcval.vet.simulate import Faults, SimulatedFabric, cluster

SIZES = {64: 16, 512: 32, 4096: 32}


def trial(n: int, per_switch: int, rng: np.random.Generator, args: argparse.Namespace) -> dict:
    nodes, topo = cluster(n, per_switch)
    switches = sorted(set(topo.values()))
    slow_sw = str(rng.choice(switches))
    outside = [x for x in nodes if topo[x] != slow_sw]
    picked = [str(x) for x in rng.choice(outside, 3, replace=False)]
    faults = Faults(slow_nodes={picked[0]: 0.7, picked[1]: 0.7, picked[2]: 0.1},
                    slow_switches={slow_sw: 0.5})
    planned = [p for rnd in plan(nodes, args.max_rounds) for p in rnd]
    bad = set(picked)
    candidates = [p for p in planned if not (set(p) & bad) and topo[p[0]] != slow_sw
                  and topo[p[1]] != slow_sw]
    for i in rng.choice(len(candidates), 2, replace=False):
        faults.slow_links[candidates[int(i)]] = 0.5
    fabric = SimulatedFabric(nodes, topo, faults, noise=args.noise, dip_rate=args.dip_rate,
                             rng=rng)
    camp, verdict = campaign.run(nodes, fabric.measure, JudgeSettings(),
                                 max_rounds=args.max_rounds, topology=topo,
                                 follow_up_rounds=args.follow_up)
    named_nodes = {c.name for c in verdict.culprits if c.kind == "node"}
    named_links = {pair(*c.name.split("<->")) for c in verdict.culprits if c.kind == "link"}
    named_sw = {c.name for c in verdict.culprits if c.kind == "switch"}
    in_sw = {x for x in nodes if topo[x] == slow_sw}
    return {
        "rounds": len(camp.rounds), "follow": len(camp.follow_up_rounds), "steps": camp.steps,
        "slow30": len(named_nodes & set(picked[:2])), "slow90": int(picked[2] in named_nodes),
        "links": len(named_links & set(faults.slow_links)), "switch": int(slow_sw in named_sw),
        "fp_nodes": len(named_nodes - bad - in_sw),
        "fp_links": len(named_links - set(faults.slow_links)),
        "fp_switch": len(named_sw - {slow_sw}),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--max-rounds", type=int, default=7)
    ap.add_argument("--follow-up", type=int, default=2)
    ap.add_argument("--noise", type=float, default=0.15,
                    help="log-normal sigma of a sample (lab at 1g under load: 0.15; at 100m: "
                    "0.007)")
    ap.add_argument("--dip-rate", type=float, default=0.05)
    ap.add_argument("--round-seconds", type=float, default=6.5,
                    help="wall time of one round (lab: one srun step per pair, 5 samples)")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--sizes", default="64,512,4096",
                    help="partition sizes (4096 runs a quarter of the trials, at least 3)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"noise sigma {args.noise}, dip rate {args.dip_rate}, {args.trials} trials per size "
          "(4096: a quarter), "
          f"max {args.max_rounds} rounds + up to {args.follow_up} follow-up rounds\n")
    print("| nodes | rounds (+follow-up) | srun steps | jobs | est. wall time | "
          "30 % slow nodes named | 90 % slow node named | slow links named | "
          "slow switch named | healthy nodes named | healthy links named | "
          "other switches named | judging time |")
    print("|" + "---|" * 13)
    for n in (int(x) for x in args.sizes.split(",")):
        per_switch = SIZES.get(n, 32)
        t = args.trials if n < 4096 else max(3, args.trials // 4)
        t0 = time.perf_counter()
        res = [trial(n, per_switch, rng, args) for _ in range(t)]
        dt = (time.perf_counter() - t0) / t
        tot = {k: sum(r[k] for r in res) for k in res[0]}
        follow = max(r["follow"] for r in res)
        rounds = res[0]["rounds"]
        steps = f"{min(r['steps'] for r in res)}-{max(r['steps'] for r in res)}"
        wall = (rounds + follow) * args.round_seconds
        print(f"| {n} | {rounds} (+{min(r['follow'] for r in res)}-{follow}) | {steps} | 1 | "
              f"<= {wall:.0f} s | {tot['slow30']}/{2 * t} | {tot['slow90']}/{t} | "
              f"{tot['links']}/{2 * t} | {tot['switch']}/{t} | {tot['fp_nodes']} | "
              f"{tot['fp_links']} | {tot['fp_switch']} | {dt:.2f} s |")


if __name__ == "__main__":
    main()
