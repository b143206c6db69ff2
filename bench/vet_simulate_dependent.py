#!/usr/bin/env python3
"""Whole vettings on dependent samples: healthy nodes named, faults named.

Each trial is one vetting as ``hpcval vet`` runs it (hpcval.vet.simvetting):
the rounds of pairs, judging, follow-up rounds and judging again
(hpcval.vet.campaign.run), then the per-node figures (shared-memory PingPong,
triad) judged by hpcval.vet.run.judge_nodes, once on the first measurement
alone and once with the confirmation (suspects measured again beside 4
healthy controls, fresh offsets). A node's samples within a step share a
random offset, and so do a pair's (sizes: hpcval.vet.simvetting, docs/vet.md).

Faults per trial: ``--faults one`` one slow node (link at 70 %, shared-memory
bandwidth at 35 %); ``--faults share`` k slow nodes and k slow links (half
rate) with k = max(1, round(N / 1000)): one of each up to 1,024 nodes, ~0.1 %
of nodes (and as many links) at 4,096 and 16,384.

Prints one Markdown row per size. Counts are summed over the trials; "per
vetting" is the worst trial, as a share of the partition's nodes.

    .venv/bin/python bench/vet_simulate_dependent.py [--faults share] [--node-dip-rate 0]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from hpcval.vet.simvetting import NodeModel, vetting

TRIALS = {64: 200, 256: 100, 1024: 40, 4096: 12, 16384: 6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faults", choices=("one", "share"), default="share")
    ap.add_argument("--sizes", default="64,256,1024,4096,16384")
    ap.add_argument("--trials-scale", type=float, default=1.0,
                    help="times the default trials per size (64: 200 ... 16,384: 6)")
    ap.add_argument("--node-dip-rate", type=float, default=0.0,
                    help="share of nodes whose whole per-node step falls to 15-30 %% "
                    "(the 16-node lab on 2 busy cores: 3/16)")
    ap.add_argument("--pair-offset", type=float, default=0.03)
    ap.add_argument("--offset-scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=41)
    args = ap.parse_args()
    model = NodeModel(offset_scale=args.offset_scale, node_dip_rate=args.node_dip_rate)
    print(f"faults {args.faults}, node dip rate {args.node_dip_rate:g}, pair offset "
          f"{args.pair_offset:g}, node offsets x{args.offset_scale:g}; {os.cpu_count()} CPUs, "
          f"load before {os.getloadavg()[0]:.1f}\n")
    print("| nodes | trials | faults named, first / confirmed | healthy nodes named, first "
          "(worst vetting) | healthy nodes named, confirmed (worst vetting) | healthy links "
          "named | suspects measured again | judging per vetting (max) |")
    print("|" + "---|" * 8)
    for n in (int(x) for x in args.sizes.split(",")):
        rng = np.random.default_rng(args.seed + n)
        k = 1 if args.faults == "one" else max(1, round(n / 1000))
        links = 0 if args.faults == "one" else k
        res = []
        for _ in range(max(1, round(TRIALS.get(n, 10) * args.trials_scale))):
            res.append(vetting(n, rng, slow_nodes=k, slow_links=links, model=model,
                               pair_offset=args.pair_offset))
        t = len(res)
        faults = (k + links) * t
        first = [r.healthy_named("first") for r in res]
        conf = [r.healthy_named("confirmed") for r in res]
        print(f"| {n:,} | {t} | {sum(r.faults_named('first') for r in res)}/{faults} / "
              f"{sum(r.faults_named('confirmed') for r in res)}/{faults} | "
              f"{sum(first)} ({max(first) / n:.2%}) | {sum(conf)} ({max(conf) / n:.2%}) | "
              f"{sum(r.healthy_links('confirmed') for r in res)} | "
              f"{sum(r.suspects for r in res)} | "
              f"{np.mean([r.judging for r in res]):.2f} s "
              f"({max(r.judging for r in res):.2f}) |", flush=True)
    print(f"\nload after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
