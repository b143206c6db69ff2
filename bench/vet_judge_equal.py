#!/usr/bin/env python3
"""The vectorised judging next to the judging it replaced, at scale: the same
verdicts (JSON-equal) and the time each takes, on simulated partitions.

For each size, trials as bench/vet_simulate.py runs them (its faults, the
campaign with the vectorised judging); then both judgings judge the
campaign's final samples, and the verdicts are compared. The old judging is
tests/vet_judge_oracle.py (the code before it was vectorised).

    .venv/bin/python bench/vet_judge_equal.py [--sizes 512,4096] [--trials 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import vet_judge_oracle as oracle  # noqa: E402

from hpcval.vet import campaign, judge  # noqa: E402
from hpcval.vet.simulate import SimulatedFabric, cluster, inject  # noqa: E402


def verdict(mod: object, nodes: list[str], samples: dict, topo: dict) -> tuple[dict, float]:
    t0 = time.perf_counter()
    v = mod.Verdict(nodes=list(nodes))  # type: ignore[attr-defined]
    mod.judge_pairs(nodes, samples, mod.PAIR_BW, mod.JudgeSettings(), v,  # type: ignore[attr-defined]
                    topo)
    return v.to_dict(), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="512,4096")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--noise", type=float, default=0.15)
    ap.add_argument("--dip-rate", type=float, default=0.05)
    args = ap.parse_args()
    from scipy import stats  # noqa: F401  (imported once, outside the timings)

    print(f"noise {args.noise}, dip rate {args.dip_rate}; {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| nodes | trial | pairs | same verdict | names | judging before | judging now |")
    print("|---|---|---|---|---|---|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        for t in range(args.trials):
            nodes, topo = cluster(n, 16 if n == 64 else 32)
            rng = np.random.default_rng(1000 * n + t)
            inj = inject(nodes, topo, rng)
            fabric = SimulatedFabric(nodes, topo, inj.faults, noise=args.noise,
                                     dip_rate=args.dip_rate, rng=rng)
            camp, _ = campaign.run(nodes, fabric.measure, judge.JudgeSettings(), max_rounds=7,
                                   topology=topo)
            new, t_new = verdict(judge, nodes, camp.samples, topo)
            old, t_old = verdict(oracle, nodes, camp.samples, topo)
            names = ", ".join(f"{c['kind']} {c['name']}" for c in new["culprits"])
            print(f"| {n} | {t + 1} | {len(camp.samples)} | {'yes' if new == old else 'NO'} | "
                  f"{len(new['culprits'])}: {names[:60]}... | {t_old:.2f} s | {t_new:.2f} s |",
                  flush=True)
    print(f"\nload after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
