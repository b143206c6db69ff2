"""What ``hpcval vet`` reads on each node: the tuning audit and the CPU frequency.

Runs as an srun step on the node (``python -m hpcval.vet.probe``) and prints one
line ``HPCVAL-VET-PROBE {json}``: the audit findings against the site's host
expectations, and ``samples`` readings of the mean ``cpu MHz`` of
``/proc/cpuinfo`` (or of ``scaling_cur_freq`` where cpuinfo has none),
``interval`` seconds apart.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from dataclasses import asdict
from pathlib import Path

from hpcval.node.audit import audit, load_expectations

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hpcval.vet.probe")
    ap.add_argument("--expect", help="host expectations YAML of the site")
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--interval", type=float, default=0.2)
    args = ap.parse_args(argv)
    findings = audit(load_expectations(args.expect)) if args.expect else []
    mhz = []
    for i in range(args.samples):
        if i:
            time.sleep(args.interval)
        value = cpu_mhz()
        if value is not None:
            mhz.append(value)
    print(MARKER + json.dumps({"host": socket.gethostname(), "cpu_mhz": mhz,
                               "audit": [asdict(f) for f in findings]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
