"""Other work on this host while a run's checks ran on it.

A benchmark on a machine that other work shares measures that work too: on
the 2-core development VM, under a load of 6-8 from other processes, two
PingPong ranks over shared memory gave 94 MB/s at 1 MiB instead of ~26,000
and failed their band. Where a site's partitions run their jobs on this host
(ReFrame's ``local`` scheduler), the CPU time the whole host spent during the
run, less what the run itself spent (hpcval, ReFrame and every process they
waited for: ``RUSAGE_CHILDREN``), is the CPU time of other work. A failed run
names it, so that a person looks at the machine before the benchmark.

What it assumes: Linux's ``/proc/stat`` (busy = every state but idle and
iowait), and that the run's processes were reaped by their parents (ReFrame
waits for its jobs, launchers for their ranks), so their time is in
``RUSAGE_CHILDREN``; a process the run left behind counts as other work.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from typing import Any

#: Other work is named when it used at least this many CPUs on average.
NOTABLE_CPUS = 0.5


def _host_busy_seconds() -> float | None:
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    busy = sum(ticks) - ticks[3] - ticks[4] - ticks[7]  # steal: another guest's, not ours
    return busy / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    own = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        own += r.ru_utime + r.ru_stime
    return own


@dataclass
class HostLoad:
    """Started before the run's checks, read after them."""

    wall: float
    host: float | None
    own: float

    @classmethod
    def start(cls) -> HostLoad:
        return cls(time.monotonic(), _host_busy_seconds(), _own_seconds())

    def others(self) -> float | None:
        """CPUs other work used on average since :meth:`start` (None where
        ``/proc/stat`` cannot be read or no time passed)."""
        wall = time.monotonic() - self.wall
        host = _host_busy_seconds()
        if self.host is None or host is None or wall <= 0:
            return None
        return max(0.0, (host - self.host) - (_own_seconds() - self.own)) / wall


def runs_here(config: Any) -> bool:
    """Whether every partition of a ReFrame site config runs its jobs on
    this host (the ``local`` scheduler)."""
    parts = [p for s in config["systems"] or [] for p in s.get("partitions", [])]
    return bool(parts) and all(p.get("scheduler") == "local" for p in parts)


def note(others: float | None, cpus: int) -> str:
    """The line a failed run prints, or ``""`` where other work was negligible."""
    if others is None or others < NOTABLE_CPUS:
        return ""
    return (f"Other work on this host used {others:.1f} of its {cpus} CPUs on average while "
            "the checks ran: the figures are this host's under that load; run again when it "
            "is idle before looking for a fault (docs/errors.md)\n")
