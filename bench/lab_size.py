"""How large a lab this machine holds: memory and start-up per lab size.

    flock /tmp/hpcval-lab.lock .venv/bin/python bench/lab_size.py 8 16 32 48 64

For each size: ``hpcval lab up --nodes N --no-file-server`` (1g links), then the
machine's used memory (MemTotal - MemAvailable) against before the lab, the
resident memory of the lab's daemons (every ``slurmd``, ``slurmctld``,
``munged``), the network namespaces, the time until every node was idle, and
one 1-task-per-node ``srun hostname`` over all nodes (what a vetting's step
costs in start-up); then ``lab down``. Needs root; take the lab lock around it.
One Markdown row per size.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from hpcval.lab import cluster, network


def mem_used() -> int:
    text = Path("/proc/meminfo").read_text()
    vals = {k: int(v) * 1024 for k, v in re.findall(r"^(\w+):\s+(\d+) kB", text, re.M)}
    return vals["MemTotal"] - vals["MemAvailable"]


def rss(comm: str) -> tuple[int, int]:
    """(processes, resident bytes) of every process named ``comm``."""
    count = total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != comm:
                continue
            m = re.search(r"^VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
        except OSError:
            continue
        count += 1
        total += int(m.group(1)) * 1024 if m else 0
    return count, total


def one(nodes: int) -> str:
    before = mem_used()
    t0 = time.monotonic()
    cluster.up(nodes, fabric="1g", log=lambda *_: None, file_server=False)
    up_s = time.monotonic() - t0
    try:
        time.sleep(3)
        used = mem_used() - before
        n_slurmd, slurmd = rss("slurmd")
        _, ctld = rss("slurmctld")
        _, munge = rss("munged")
        netns = sum(1 for n in network.existing_netns() if n.startswith("hpcval-lab"))
        t0 = time.monotonic()
        proc = subprocess.run(["srun", f"--nodes={nodes}", f"--ntasks={nodes}",
                               "--ntasks-per-node=1", "hostname"], capture_output=True,
                              text=True, timeout=300, check=False)
        step_s = time.monotonic() - t0
        ok = proc.returncode == 0 and len(set(proc.stdout.split())) == nodes
    finally:
        cluster.down(log=lambda *_: None)
    load = os.getloadavg()[0]
    return (f"| {nodes} | {up_s:.1f} s | {used / 2**20:.0f} MiB | {n_slurmd} | "
            f"{slurmd / 2**20:.0f} MiB ({slurmd / max(n_slurmd, 1) / 2**20:.1f} each) | "
            f"{(ctld + munge) / 2**20:.0f} MiB | {netns} | {step_s:.1f} s "
            f"{'ok' if ok else 'FAILED: ' + proc.stderr.strip()[-120:]} | {load:.1f} |")


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [8, 16, 32, 48, 64]
    print(f"# lab sizes, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, "
          f"{os.cpu_count()} CPUs, {Path('/proc/meminfo').read_text().split()[1]} kB memory")
    print("| nodes | up (all idle) | memory used by the lab | slurmd processes | their RSS "
          "| slurmctld + munged RSS | namespaces | srun hostname on all nodes | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        print(one(n), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
