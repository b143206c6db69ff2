"""CPU cost of communication (G. Shainer, "Offloading vs. onloading: the case of
CPU utilization"): CPU time a rank spends during a
transfer, and the share of the CPU left to the application.

``python -m hpcval.node.cpucost -- PROGRAM ARGS...`` is launched by ``mpirun`` in
place of the benchmark, once per rank. It runs the program (inheriting the
launcher's file descriptors, so MPI's process manager still reaches it),
waits, and writes one line to standard error::

    HPCVAL-CPUCOST rank=0 wall_s=3.21 user_s=3.10 sys_s=0.08 instructions=unsupported ...

CPU time comes from ``getrusage(RUSAGE_CHILDREN)``, which needs no
privileges. Where ``perf`` exists the program runs under ``perf stat`` for
instructions and cycles; a kernel or VM without hardware counters makes
those ``unsupported`` (and a missing ``perf`` makes them ``unavailable``),
which the check reports rather than hides. The article warns that a polling
benchmark always shows 100 %: the figure is only meaningful when the MPI
library waits without polling (Intel MPI: ``I_MPI_WAIT_MODE=1``), which is
why the check runs both ways.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from hpcval.core.errors import ParseError

MARKER = "HPCVAL-CPUCOST"
#: One record: from the marker to the next marker or the end of the line (two ranks'
#: records can share a line when their writes interleave in the launcher's forwarding).
_LINE_RE = re.compile(rf"{MARKER}\s+(?P<body>(?:(?!{MARKER}).)*)")
_RANK_VARS = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "MPI_LOCALRANKID")


@dataclass(frozen=True)
class CpuCost:
    """One rank's CPU use over its whole run."""

    rank: int
    wall_s: float
    user_s: float
    sys_s: float
    instructions: float | None
    cycles: float | None
    counters: str  # "ok", "unsupported" (no hardware counters) or "unavailable" (no perf)

    @property
    def busy_pct(self) -> float:
        """CPU time over wall time, in % of one core."""
        return 100.0 * (self.user_s + self.sys_s) / self.wall_s if self.wall_s > 0 else 0.0


def _perf_counts(path: str) -> dict[str, float | None]:
    counts: dict[str, float | None] = {}
    try:
        text = open(path).read()  # noqa: SIM115
    except OSError:
        return counts
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or line.startswith("#"):
            continue
        event = fields[2].split(":")[0]
        try:
            counts[event] = float(fields[0])
        except ValueError:
            counts[event] = None  # "<not supported>" / "<not counted>"
    return counts


def run(argv: list[str]) -> int:
    """Run ``argv``, print its CPU cost to stderr, return its exit code."""
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("usage: python -m hpcval.node.cpucost -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    rank = next((os.environ[v] for v in _RANK_VARS if v in os.environ), "-1")
    perf = shutil.which("perf")
    perf_out = None
    command = list(argv)
    if perf:
        fd, perf_out = tempfile.mkstemp(prefix="hpcval-perf-", suffix=".csv")
        os.close(fd)
        command = [perf, "stat", "-x,", "-o", perf_out, "-e", "instructions,cycles", "--",
                   *argv]
    start = time.monotonic()
    proc = subprocess.run(command, close_fds=False, check=False)
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    counters = "unavailable"
    instructions = cycles = None
    if perf_out:
        counts = _perf_counts(perf_out)
        os.unlink(perf_out)
        instructions, cycles = counts.get("instructions"), counts.get("cycles")
        counters = "ok" if instructions is not None and cycles is not None else "unsupported"
    fmt = lambda v: "na" if v is None else f"{v:.0f}"  # noqa: E731
    line = (f"{MARKER} rank={rank} wall_s={wall:.6f} user_s={usage.ru_utime:.6f} "
            f"sys_s={usage.ru_stime:.6f} instructions={fmt(instructions)} "
            f"cycles={fmt(cycles)} counters={counters}\n")
    # one write(2) for the whole line, newline included, so that ranks writing to one
    # forwarded stderr at once cannot split each other's lines
    sys.stderr.flush()
    os.write(sys.stderr.fileno(), line.encode())
    return proc.returncode


def _count(fields: dict[str, str], key: str) -> float | None:
    return None if fields[key] == "na" else float(fields[key])


def parse_cpucost(text: str, source: str = "<cpucost output>") -> list[CpuCost]:
    """Every rank's line, sorted by rank; ParseError when there is none or a
    line is damaged."""
    records = []
    for m in _LINE_RE.finditer(text):
        fields = dict(kv.split("=", 1) for kv in m.group("body").split() if "=" in kv)
        try:
            records.append(CpuCost(
                rank=int(fields["rank"]), wall_s=float(fields["wall_s"]),
                user_s=float(fields["user_s"]), sys_s=float(fields["sys_s"]),
                instructions=_count(fields, "instructions"), cycles=_count(fields, "cycles"),
                counters=fields["counters"]))
        except (KeyError, ValueError) as err:
            raise ParseError(f"{source}: damaged {MARKER} line {m.group(0)!r}: {err}") from None
    if not records:
        raise ParseError(f"{source}: no {MARKER} lines: the ranks did not finish "
                         "(the program failed or was killed)")
    return sorted(records, key=lambda r: r.rank)


def cpu_busy_pct(records: list[CpuCost]) -> float:
    """Median over ranks of CPU time / wall time, in % of one core."""
    return statistics.median(r.busy_pct for r in records)


def cpu_available_pct(records: list[CpuCost]) -> float:
    """Share of a core left to the application (Shainer: 99.2 % offload,
    40.4 % onload), never below 0."""
    return max(0.0, 100.0 - cpu_busy_pct(records))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
