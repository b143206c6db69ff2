#!/usr/bin/env python3
"""Per-node figures of `hpcval vet` at scale: detection, false names, judging time.

Each trial draws a partition's triad samples as hpcval.vet.simulate does (5 per
node, log-normal noise of 5 %, or ``--noise``; ``--node-spread`` adds a factor
per node), puts one node at ``--factor`` of the others and judges with
``judge_node_figure`` (the code ``hpcval vet`` runs). Prints one
Markdown row per size: trials, the slow node named, healthy nodes named (summed
over the trials, and per healthy node judged), the median p of the slow node,
and the judging time (mean and max over the trials).

    .venv/bin/python bench/vet_node_figure.py [--trials 10] [--sizes 64,512,4096]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from hpcval.vet.judge import FIGURES, JudgeSettings, Verdict, judge_node_figure


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--sizes", default="64,512,4096")
    ap.add_argument("--factor", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--noise", type=float, default=0.05,
                    help="sigma of the log-normal noise of each sample (0.05 as simulated)")
    ap.add_argument("--node-spread", type=float, default=0.0,
                    help="sigma of a log-normal factor per node, shared by its samples "
                         "(healthy nodes that differ: the rank test's null does not hold)")
    args = ap.parse_args()
    spec = FIGURES["triad_bw"]
    print(f"factor {args.factor}, noise {args.noise}, node spread {args.node_spread}\n")
    print("| nodes | trials | slow node named | healthy named | per healthy node | "
          "p of the slow node (median) | judging mean | judging max |")
    print("|---|---|---|---|---|---|---|---|")
    for n in [int(s) for s in args.sizes.split(",")]:
        rng = np.random.default_rng([args.seed, n])
        hits = false = 0
        ps: list[float] = []
        times: list[float] = []
        for _ in range(args.trials):
            draws = 20_000.0 * np.exp(rng.normal(0.0, args.noise, (n, 5)))
            draws *= np.exp(rng.normal(0.0, args.node_spread, (n, 1)))
            draws[0] *= args.factor
            samples = {f"n{i:05d}": [float(v) for v in row] for i, row in enumerate(draws)}
            verdict = Verdict(nodes=list(samples))
            t0 = time.perf_counter()
            judge_node_figure(samples, spec, JudgeSettings(), verdict)
            times.append(time.perf_counter() - t0)
            named = set(verdict.named_nodes)
            hits += "n00000" in named
            false += len(named - {"n00000"})
            p = verdict.table["n00000"][spec.name].p
            if p is not None:
                ps.append(p)
        p_med = f"{statistics.median(ps):.2g}" if ps else "-"
        print(f"| {n:,} | {args.trials} | {hits} of {args.trials} | {false} | "
              f"{false / (args.trials * (n - 1)):.1g} | {p_med} | "
              f"{statistics.mean(times):.2f} s | {max(times):.2f} s |")


if __name__ == "__main__":
    main()
