#!/usr/bin/env python3
"""Uniformity and error-counter judging of `hpcval vet` on simulated partitions.

For 64 to 16,384 nodes, 0.1 % of the nodes (at least one) carry each fault of
hpcval.vet.simidentity.FAULTS (seven fingerprint categories, an unreadable
fingerprint key, eight counters rising, an unreadable counter), one fault per
node; healthy nodes' counters rise as healthy hardware's do (corrected ECC on
5 % of the nodes at 2/h, IB symbol errors on 2 % at 0.5/h). The judging is
hpcval.vet.coded.judge, the function `hpcval vet` calls after its figures.

Prints one Markdown row per size and seed: faulty nodes, named with the
expected code, missed, named with another code, healthy nodes named, and the
judging time (uniformity + counters + rules, the best of ``--repeats``: wall
and CPU seconds of this process, with the load average beside them).

    .venv/bin/python bench/vet_node_findings.py [--sizes 64,1024,4096,16384] [--seeds 3]
"""

from __future__ import annotations

import argparse
import os
import time

from hpcval.vet import coded
from hpcval.vet.model import JudgeSettings, Verdict
from hpcval.vet.simidentity import partition


def one(n: int, seed: int, repeats: int) -> dict[str, float | int]:
    part = partition(n, seed=seed)
    best = cpu = float("inf")
    verdict = Verdict(list(part.fingerprints))
    for _ in range(repeats):
        verdict = Verdict(list(part.fingerprints))
        t0, c0 = time.perf_counter(), time.process_time()
        coded.judge(verdict, part.fingerprints, part.unknown, part.now, part.previous,
                    JudgeSettings())
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    named: dict[str, set[str]] = {}
    for c in verdict.culprits:
        for node in c.nodes:
            named.setdefault(node, set()).add(c.code)
    hit = sum(1 for node, code in part.expected.items() if code in named.get(node, set()))
    other = sum(1 for node, code in part.expected.items()
                if named.get(node, set()) - {code})
    healthy = sum(1 for node in named if node not in part.expected)
    return {"n": n, "faulty": len(part.expected), "named": hit,
            "missed": len(part.expected) - hit, "other_code": other, "healthy_named": healthy,
            "partition_findings": len(verdict.partition), "seconds": best, "cpu": cpu}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,256,1024,4096,16384")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print("| nodes | seed | faulty nodes | named with their code | missed | also another code "
          "| healthy named | partition findings | judging (s) | CPU (s) | load average |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        for seed in range(args.seeds):
            r = one(n, seed, args.repeats)
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"| {n:,} | {seed} | {r['faulty']} | {r['named']} | {r['missed']} | "
                  f"{r['other_code']} | {r['healthy_named']} | {r['partition_findings']} | "
                  f"{r['seconds']:.2f} | {r['cpu']:.2f} | {load} |", flush=True)


if __name__ == "__main__":
    main()
