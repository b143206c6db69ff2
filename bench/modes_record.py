"""Record two-moded latencies: IMB PingPong between two ranks of this machine.

On a loaded machine the small-message latency of clean runs is two-moded: a
sample is fast (a few us, both ranks on a core) or slow (tens to hundreds of us,
a rank descheduled). ``--fault yield`` records runs whose ranks yield the core
at every poll (``I_MPI_THREAD_YIELD=3``, spin count 1): the fast mode vanishes,
every sample waits for a wake-up, as under a delay on every message.

    python bench/modes_record.py --clean 30 --fault-runs 10 -o tests/data/judging/local-modes.json

Each run starts IMB-MPI1 ``--samples`` times (the venv's Intel MPI over shared
memory, ``-iter 20 -iter_policy off``): one sample per start and message size.
The file has the layout of the lab recordings (tests/data/judging/README.md)
with each run's ``condition`` (``clean`` or the fault) and load average.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

SIZES = {"lat_0B": 0, "lat_8B": 8}
FAULTS = {"yield": {"I_MPI_THREAD_YIELD": "3", "I_MPI_SPIN_COUNT": "1",
                    "I_MPI_SHM_SPIN_COUNT": "1"}}


def env(fault: str | None) -> dict[str, str]:
    prefix = Path(sys.prefix)
    e = dict(os.environ)
    e.update({"PATH": f"{prefix / 'bin'}:{e.get('PATH', '')}",
              "LD_LIBRARY_PATH": f"{prefix / 'lib'}:{e.get('LD_LIBRARY_PATH', '')}",
              "FI_PROVIDER_PATH": str(prefix / "lib"), "I_MPI_ROOT": str(prefix)})
    if fault:
        e.update(FAULTS[fault])
    return e


def one_sample(fault: str | None) -> dict[str, float]:
    imb = str(Path(sys.prefix) / "bin" / "IMB-MPI1")
    out = subprocess.run(["mpirun", "-n", "2", imb, "PingPong", "-msglog", "0:3", "-iter", "20",
                          "-iter_policy", "off"], env=env(fault), capture_output=True,
                         text=True, timeout=120, check=True).stdout
    got = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0].isdigit() and parts[1].isdigit():
            for name, size in SIZES.items():
                if int(parts[0]) == size:
                    got[name] = float(parts[2])
    if set(got) != set(SIZES):
        raise SystemExit(f"IMB-MPI1 printed no PingPong table:\n{out[-2000:]}")
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clean", type=int, default=30)
    ap.add_argument("--fault-runs", type=int, default=10)
    ap.add_argument("--fault", choices=sorted(FAULTS), default="yield")
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()
    plan = [None] * args.clean + [args.fault] * args.fault_runs
    runs = []
    for i, fault in enumerate(plan):
        start = time.time()
        samples = [one_sample(fault) for _ in range(args.samples)]
        runs.append({"index": i, "condition": fault or "clean", "started": start,
                     "seconds": round(time.time() - start, 1),
                     "load1": os.getloadavg()[0],
                     "figures": {n: [s[n] for s in samples] for n in SIZES}})
        print(f"run {i} {fault or 'clean'}: " + ", ".join(
            f"{n} median {sorted(v)[len(v) // 2]:.2f}" for n, v in runs[-1]["figures"].items()),
            flush=True)
    data = {"experiment": "IMB PingPong, two ranks of one machine, Intel MPI over shared "
                          "memory, the machine loaded by other work",
            "machine": {"host": platform.node(), "cpus": os.cpu_count(),
                        "kernel": platform.release(), "machine": platform.machine()},
            "samples_per_run": args.samples, "imb_iterations": 20,
            "fault": {"name": args.fault, "env": FAULTS[args.fault]},
            "figures": {n: {"size": s, "unit": "us", "better": "lower"}
                        for n, s in SIZES.items()},
            "runs": runs}
    args.output.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
