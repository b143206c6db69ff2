"""What ``hpcval vet`` reads on each node: the tuning audit, the CPU frequency,
the memory available, and (``--triad``) the node's triad samples, or (``--dgemm``)
its DGEMM samples.

Runs as one task per node of one srun step over all nodes
(``python -m hpcval.vet.probe``) and prints one line ``HPCVAL-VET-PROBE {json}``
naming its host: the audit findings against the site's host expectations,
``samples`` readings of the mean ``cpu MHz`` of ``/proc/cpuinfo`` (or of
``scaling_cur_freq`` where cpuinfo has none), ``interval`` seconds apart, the
memory available (``MemAvailable`` of ``/proc/meminfo``) and the kernel's boot
id (nodes that print the same boot id share one machine and its memory, as the
lab's nodes do), the node's fingerprint by category with the keys it could
not read (:mod:`hpcval.node.fingerprint`; ``--mounts`` names the mount points
jobs need) and its cumulative error counters (:mod:`hpcval.node.counters`).

With ``--triad CFDIO --triad-n N --reps R`` it runs instead ``samples`` times
``CFDIO --mode triad`` as a single MPI process on its node (the step's PMI
variables removed, so each is an MPI singleton) and prints the best triad of
each run; a run that fails or is killed is named with its cause (a signal:
which one), never dropped silently.

With ``--dgemm [--dgemm-n N]`` it runs instead :mod:`hpcval.node.dgemm` for
``samples`` multiplies and prints ``"dgemm": {"gflops": [...], "peak_gflops",
"blas", "n", ...}``; a run that fails is named in ``errors``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from hpcval.node.audit import audit, load_expectations
from hpcval.node.counters import read_counters
from hpcval.node.fingerprint import fingerprint

MARKER = "HPCVAL-VET-PROBE "


def cpu_mhz(root: Path = Path("/")) -> float | None:
    """Mean current frequency over all CPUs, in MHz."""
    try:
        text = (root / "proc/cpuinfo").read_text()
    except OSError:
        text = ""
    values = [float(line.split(":", 1)[1]) for line in text.splitlines()
              if line.lower().startswith("cpu mhz")]
    if not values:
        freq = sorted((root / "sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_cur_freq"))
        try:
            values = [int(p.read_text()) / 1000 for p in freq]
        except (OSError, ValueError):
            values = []
    return sum(values) / len(values) if values else None


def mem_available(root: Path = Path("/")) -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes."""
    try:
        text = (root / "proc/meminfo").read_text()
    except OSError:
        return None
    m = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


def boot_id(root: Path = Path("/")) -> str:
    """The running kernel's boot id: the same on every node that shares one machine."""
    try:
        return (root / "proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


#: variables by which a process finds the PMI of its srun step; without them an
#: MPI program runs as a singleton
_PMI_PREFIXES = ("PMI_", "PMIX_", "I_MPI_PMI", "SLURM_PMI", "SLURM_MPI_TYPE")


def _cause(rc: int, stderr: str) -> str:
    if rc < 0:
        name = signal.Signals(-rc).name
        why = " (the kernel's OOM killer, or someone, ended it)" if -rc == signal.SIGKILL else ""
        return f"killed by {name}{why}"
    last = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return f"exit {rc}" + (f": {last[-1][:200]}" if last else "")


def triad_samples(cmd: list[str], samples: int) -> tuple[list[float], list[str]]:
    """Run ``cmd`` (a cfdio triad) ``samples`` times: (MB/s of each run that
    printed one, the cause of each that did not)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_PMI_PREFIXES)}
    values: list[float] = []
    errors: list[str] = []
    for i in range(samples):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        m = re.search(r"triad_MBs=([0-9.eE+-]+)", proc.stdout)
        if proc.returncode == 0 and m:
            values.append(float(m.group(1)))
        else:
            errors.append(f"triad sample {i + 1}: {_cause(proc.returncode, proc.stderr)}")
    return values, errors


def dgemm_samples(samples: int, n: int | None) -> tuple[dict[str, object], list[str]]:
    """Run the DGEMM runner (:mod:`hpcval.node.dgemm`) once for ``samples``
    multiplies: (its ``dgemm`` object, the cause if it printed none)."""
    cmd = [sys.executable, "-m", "hpcval.node.dgemm", "--json", f"--samples={samples}",
           *([f"--n={n}"] if n else [])]
    env = {k: v for k, v in os.environ.items() if not k.startswith(_PMI_PREFIXES)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (ValueError, IndexError):
        data = None
    if isinstance(data, dict) and data.get("gflops"):
        return data, []
    empty = {"gflops": [], "peak_gflops": None, "blas": "", "n": n or 0}
    return empty, [f"dgemm: {_cause(proc.returncode, proc.stderr)}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hpcval.vet.probe")
    ap.add_argument("--expect", help="host expectations YAML of the site")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--triad", metavar="CFDIO", help="run CFDIO's triad SAMPLES times instead")
    ap.add_argument("--triad-n", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--mounts", help="comma-separated mount points jobs need (default: every "
                    "mount of a storage file system)")
    ap.add_argument("--dgemm", action="store_true", help="run SAMPLES DGEMM multiplies instead")
    ap.add_argument("--dgemm-n", type=int, default=None, help="DGEMM's matrix order "
                    "(default: sized on the node, hpcval.node.sizing.dgemm)")
    args = ap.parse_args(argv)
    if args.dgemm:
        data, errors = dgemm_samples(args.samples, args.dgemm_n)
        print(MARKER + json.dumps({"host": socket.gethostname(), "dgemm": data,
                                   "errors": errors}), flush=True)
        return 0
    if args.triad:
        values, errors = triad_samples([args.triad, "--mode", "triad", "--triad-n",
                                        str(args.triad_n), "--reps", str(args.reps)],
                                       args.samples)
        print(MARKER + json.dumps({"host": socket.gethostname(), "triad_bw": values,
                                   "errors": errors}), flush=True)
        return 0
    findings = audit(load_expectations(args.expect)) if args.expect else []
    mhz = []
    for i in range(args.samples):
        if i:
            time.sleep(args.interval)
        value = cpu_mhz()
        if value is not None:
            mhz.append(value)
    prints, unknown = fingerprint(mounts=args.mounts.split(",") if args.mounts else None)
    print(MARKER + json.dumps({"host": socket.gethostname(), "cpu_mhz": mhz,
                               "audit": [asdict(f) for f in findings],
                               "mem_available": mem_available(), "boot_id": boot_id(),
                               "fingerprint": prints, "fingerprint_unknown": unknown,
                               "counters": read_counters()}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
