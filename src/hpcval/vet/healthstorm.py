"""The gate's yardstick when many nodes measure at once: contention, CPU share,
and a finding confirmed after a random delay before it counts.

Slurm starts its ``HealthCheckProgram`` on every node within seconds
(``scontrol reconfigure``, a restart of the slurmds, ``CYCLE`` on a small
partition). Where nodes share cores (the lab) or where something else runs on
the node, each measurement then gets a fraction of a CPU and every figure
reads low against the stored vettings. The rules here, each with what it
assumes (docs/vet.md, "A gate that cannot drain in a storm"):

- **Contention is measured, not guessed.** Before and after each pass the gate
  spins for ``spin`` seconds and counts the other runnable tasks of the node
  (``/proc/loadavg``, sampled while it runs) and the CPU time it got. The
  *fair share* is what a CPU-bound process should get there,
  ``min(1, CPUs / (others + 1))``. A pass whose fair share is under
  :data:`BUSY_SHARE` is *busy*: its triad and shared-memory PingPong are not
  evidence against the node (a good figure still counts as good).
- **CPU share** (figure ``cpu_share``): the CPU time the spin got over its
  fair share. Off when under :data:`LOW_SHARE` of it in every reading whose
  fair share was at least :data:`BUSY_SHARE`: the node holds back its own
  processes (a cgroup quota, a CPU cap), which the best-of-samples triad
  does not see (one triad repetition fits inside a quota period). Off too,
  however busy the node, when the kernel throttled the gate's cgroup (or a
  parent) for its CPU quota :data:`THROTTLED` of the time of every reading
  (``cpu.stat``): then the kernel itself says why.
- **Confirmed before it counts.** A figure is off only when two judged passes,
  a random delay of ``confirm`` seconds apart, both say so; one ok pass clears
  it (a dip that does not come back is not a finding). Busy passes decide
  nothing. While the CPU share is undecided the next pass is light (the spins
  alone); what is still undecided when the budget ends is *not judged*.
"""

from __future__ import annotations

import os
import random
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import HpcvalError
from hpcval.vet.judge import FIGURES, _fmt

#: a pass whose fair share is under this (CPU) is busy: CPU-bound figures are not evidence
BUSY_SHARE = 0.5
#: the CPU share is off under this fraction of the fair share
LOW_SHARE = 0.5
#: the CPU share is off, however busy the node, when the kernel throttled the gate's
#: cgroup for its CPU quota this fraction of every reading's time
THROTTLED = 0.3
#: figures that a share of the CPU limits (judged only in passes that are not busy)
CONTENDED = ("triad_bw", "shm_pingpong_bw_1MiB", "dgemm_gflops")


@dataclass
class Contention:
    """One spin: what the node gave a CPU-bound process of the gate."""

    cpus: int
    #: other runnable tasks of the node, mean of the samples taken while the spin ran
    others: float
    #: CPU seconds the spin got per wall second
    share: float
    seconds: float
    #: seconds the kernel held the gate's cgroup (or a parent) back for its CPU quota
    throttled: float = 0.0
    #: the tightest CPU quota of that chain, in CPUs (None: no quota)
    quota: float | None = None

    @property
    def fair(self) -> float:
        return min(1.0, self.cpus / (self.others + 1.0))

    @property
    def relative(self) -> float:
        return self.share / self.fair

    @property
    def busy(self) -> bool:
        return self.fair < BUSY_SHARE


def running_tasks(text: str) -> int:
    """Runnable tasks of ``/proc/loadavg`` (its fourth field, ``running/total``)."""
    return int(text.split()[3].split("/")[0])


def cpu_cgroups(proc_cgroup: Path = Path("/proc/self/cgroup"),
                root: Path = Path("/sys/fs/cgroup")) -> list[Path]:
    """The cgroup directories of this process's CPU controller, itself first
    and then each parent up to the root (cgroup v1 ``cpu`` or v2)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        _hid, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            base = next((root / d for d in (controllers, "cpu,cpuacct", "cpu")
                         if (root / d / "cpu.stat").exists()), None)
            break
    else:
        path = next((ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")), "")
        base = root if (root / "cpu.stat").exists() else None
    if base is None:
        return []
    here = base / path.lstrip("/")
    chain = [here, *here.parents]
    return [d for d in chain if d == base or base in d.parents]


def throttling(chain: list[Path]) -> tuple[float, float | None]:
    """Seconds throttled so far summed over the chain (v1 ``throttled_time`` ns,
    v2 ``throttled_usec``), and the tightest quota in CPUs."""
    total, quota = 0.0, None
    for d in chain:
        try:
            stat = dict(ln.split()[:2] for ln in (d / "cpu.stat").read_text().splitlines()
                        if len(ln.split()) >= 2)
        except OSError:
            continue
        if "throttled_time" in stat:
            total += int(stat["throttled_time"]) / 1e9
        elif "throttled_usec" in stat:
            total += int(stat["throttled_usec"]) / 1e6
        q = None
        try:
            if (d / "cpu.cfs_quota_us").exists():
                us = int((d / "cpu.cfs_quota_us").read_text())
                period = int((d / "cpu.cfs_period_us").read_text())
                q = us / period if us > 0 else None
            elif (d / "cpu.max").exists():
                us_s, period_s = (d / "cpu.max").read_text().split()
                q = int(us_s) / int(period_s) if us_s != "max" else None
        except (OSError, ValueError):
            q = None
        if q is not None:
            quota = q if quota is None else min(quota, q)
    return total, quota


def spin(seconds: float, loadavg: Path = Path("/proc/loadavg"),
         cpus: int | None = None, chain: list[Path] | None = None) -> Contention:
    """Spin for ``seconds`` of wall time in this process, reading the runnable
    tasks of the node between turns (the spin is one of them) and what the
    kernel throttled the gate's cgroups meanwhile."""
    n = cpus or len(os.sched_getaffinity(0)) or 1
    chain = cpu_cgroups() if chain is None else chain
    held0, _ = throttling(chain)
    c0, t0 = time.process_time(), time.monotonic()
    counts: list[int] = []
    while time.monotonic() - t0 < seconds:
        counts.append(running_tasks(loadavg.read_text()))
        end = time.monotonic() + 0.005
        while time.monotonic() < end:
            pass
    wall = time.monotonic() - t0
    cpu = time.process_time() - c0
    held1, quota = throttling(chain)
    others = max(0.0, sum(counts) / len(counts) - 1.0) if counts else 0.0
    return Contention(n, others, cpu / wall, wall, max(0.0, held1 - held0), quota)


@dataclass
class PassResult:
    """One measurement pass: figure -> "ok", "off" or "busy", and its evidence."""

    started: float
    seconds: float
    contention: list[Contention]
    status: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)
    #: the spins alone (the CPU share), no triad or PingPong
    light: bool = False

    @property
    def fair(self) -> float:
        return min(c.fair for c in self.contention)


def share_status(readings: list[Contention]) -> tuple[str, str]:
    """``cpu_share`` of one pass: busy when no reading had a fair share of at
    least :data:`BUSY_SHARE`; off when every one that had got under
    :data:`LOW_SHARE` of it."""
    held = [c for c in readings if c.throttled >= THROTTLED * c.seconds]
    if readings and len(held) == len(readings):  # the kernel says why, however busy
        worst = min(held, key=lambda c: c.share)
        quota = f"{worst.quota:.2f} CPU" if worst.quota is not None else "a CPU quota"
        return "off", (f"CPU share {worst.share:.2f} of a CPU: held back by its cgroup's "
                       f"quota of {quota} for {worst.throttled / worst.seconds * 100:.0f} % of "
                       f"the time ({worst.others:.1f} other runnable task(s) on "
                       f"{worst.cpus} CPU(s))")
    judged = [c for c in readings if not c.busy]
    if not judged:
        return "busy", ""
    best = max(judged, key=lambda c: c.relative)
    if best.relative >= LOW_SHARE:
        return "ok", ""
    return "off", (f"CPU share {best.share:.2f} of a CPU where {best.fair:.2f} was fair "
                   f"({best.others:.1f} other runnable task(s) on {best.cpus} CPU(s)), "
                   f"{best.relative * 100:.0f} % of it")


def classify(verdict_figures: dict[str, dict[str, Any]], audit_bad: list[str],
             readings: list[Contention]) -> tuple[dict[str, str], dict[str, str]]:
    """The status of each figure in one pass, from :func:`judge_health`'s figures
    (each with its yardsticks) and the contention around the pass."""
    status: dict[str, str] = {}
    evidence: dict[str, str] = {}
    busy = min(c.fair for c in readings) < BUSY_SHARE if readings else False
    for fig, entry in verdict_figures.items():
        off = [y for y in entry["yardsticks"] if y["off"]]
        if not entry["yardsticks"]:
            continue
        if off and busy and fig in CONTENDED:
            status[fig] = "busy"
        elif off:
            spec = FIGURES[fig]
            status[fig] = "off"
            evidence[fig] = f"{spec.label} {_fmt(entry['value'])} {spec.unit} (" + "; ".join(
                f"{y['worse_by'] * 100:.0f} % below the {y['against']} median "
                f"{_fmt(y['center'])} {spec.unit}, z {y['z']:.1f}" for y in off) + ")"
        else:
            status[fig] = "ok"
    status["cpu_share"], share_ev = share_status(readings)
    if share_ev:
        evidence["cpu_share"] = share_ev
    status["tuning"] = "off" if audit_bad else "ok"
    if audit_bad:
        evidence["tuning"] = "tuning audit: " + "; ".join(audit_bad)
    return status, evidence


@dataclass
class Confirmation:
    """What the passes add up to."""

    passes: list[PassResult]
    #: figure -> evidence of its last off pass, for figures off in two judged passes
    confirmed: dict[str, str] = field(default_factory=dict)
    #: figures no judged pass decided (every pass busy, or the budget ended first)
    undecided: list[str] = field(default_factory=list)
    #: figures cleared by an ok pass after an off one (a dip that did not come back)
    cleared: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"passes": [{"started": round(p.started, 2), "seconds": round(p.seconds, 1),
                            "light": p.light,
                            "fair_share": round(p.fair, 2),
                            "contention": [asdict(c) for c in p.contention],
                            "status": p.status} for p in self.passes],
                "confirmed": self.confirmed, "undecided": self.undecided,
                "cleared": self.cleared}


def add_up(passes: list[PassResult], needed: int = 2) -> Confirmation:
    """Off in ``needed`` judged passes and never ok: confirmed; ok once: ok."""
    out = Confirmation(passes)
    figures = list(dict.fromkeys(f for p in passes for f in p.status))
    for fig in figures:
        seen = [p.status.get(fig, "busy") for p in passes]
        offs = [p for p in passes if p.status.get(fig) == "off"]
        if "ok" in seen:
            if offs:
                out.cleared.append(fig)
        elif len(offs) >= needed:
            out.confirmed[fig] = offs[-1].evidence[fig]
        else:
            out.undecided.append(fig)
    return out


def pending(passes: list[PassResult], needed: int = 2) -> bool:
    """Whether another pass could still change the verdict: nothing confirmed
    yet (one confirmed finding is the verdict) and something undecided."""
    c = add_up(passes, needed)
    return bool(c.undecided) and not c.confirmed


def light_next(passes: list[PassResult], needed: int = 2) -> bool:
    """The next pass is light (the spins alone) while the CPU share is
    undecided and no other undecided figure waits for its confirmation."""
    undecided = add_up(passes, needed).undecided
    waiting = [f for f in undecided if f != "cpu_share"
               and any(p.status.get(f) == "off" for p in passes)]
    return "cpu_share" in undecided and not waiting


def confirm_loop(measure: Callable[[float, bool], PassResult], budget: float,
                 delay: tuple[float, float], needed: int = 2,
                 rng: random.Random | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 log: Callable[[str], None] = lambda _m: None) -> Confirmation:
    """Passes until every figure is decided or the budget cannot hold another:
    a random delay in ``delay`` before each pass after the first, so that nodes
    started together do not measure again at the same instant. While the CPU
    share is undecided the next pass is *light* (``measure(budget, True)``: the
    spins alone, about a second), unless another figure waits for its
    confirmation (:func:`light_next`)."""
    rng = rng or random.Random()
    t0 = time.monotonic()
    passes = [measure(budget, False)]
    while pending(passes, needed):
        light = light_next(passes, needed)
        wait = rng.uniform(*delay)
        # a light pass is the two spins of a full one: about what they took
        first = (sum(c.seconds for c in passes[0].contention) + 0.2 if light
                 else passes[0].seconds)
        longest = max((p.seconds for p in passes if p.light == light), default=first)
        left = budget - (time.monotonic() - t0)
        if left < wait + 1.3 * longest:
            log(f"no time for another {'light ' if light else ''}pass ({left:.0f} s left, "
                f"one took {longest:.0f} s)")
            break
        sleep(wait)
        try:
            passes.append(measure(budget - (time.monotonic() - t0), light))
        except HpcvalError as err:  # a later pass that fails decides nothing
            log(f"pass {len(passes) + 1}: {err}")
            break
    return add_up(passes, needed)


def node_limits(node: str, proc: Path = Path("/proc")) -> tuple[str, dict[int, tuple[int, int]]]:
    """The limits a job's task gets on this node (``srun --propagate=NONE``):
    those of the node's ``slurmd`` (the one started for ``node`` where several
    run on one kernel, as on the lab), else of PID 1. Returns where they came
    from and ``{RLIMIT_*: (soft, hard)}`` for open files and locked memory."""
    names = {"Max open files": resource.RLIMIT_NOFILE,
             "Max locked memory": resource.RLIMIT_MEMLOCK}
    source = proc / "1"
    candidates = []
    for p in proc.iterdir():
        if not p.name.isdigit():
            continue
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(argv[0].decode(errors="replace")).name == "slurmd":
            candidates.append((p, [a.decode(errors="replace") for a in argv]))
    mine = [p for p, argv in candidates if node in argv]
    if mine:
        source = mine[0]
    elif len(candidates) == 1:
        source = candidates[0][0]
    out: dict[int, tuple[int, int]] = {}
    try:
        text = (source / "limits").read_text()
    except OSError:
        return str(source), out
    for line in text.splitlines():
        for name, which in names.items():
            if line.startswith(name):
                soft, hard = line[len(name):].split()[:2]
                out[which] = tuple(resource.RLIM_INFINITY if v == "unlimited" else int(v)
                                   for v in (soft, hard))  # type: ignore[assignment]
    return f"{'slurmd' if source != proc / '1' else 'PID 1'} ({source.name})", out


#: the audit's setting for each limit the gate takes from the node
LIMIT_SETTINGS = {resource.RLIMIT_NOFILE: "rlimit_nofile",
                  resource.RLIMIT_MEMLOCK: "rlimit_memlock"}


def take_node_limits(node: str) -> tuple[str, set[str]]:
    """Give this process (and so every task it starts) the node's own limits,
    not those of the shell that launched it. Returns a note on what was done
    and the audit settings whose limit could not be taken (raising a hard limit
    needs CAP_SYS_RESOURCE): those are not judged, the shell's value is not the
    node's."""
    source, limits = node_limits(node)
    done, failed, untaken = [], [], set()
    for which, (soft, hard) in limits.items():
        name = LIMIT_SETTINGS[which]
        cur_soft, cur_hard = resource.getrlimit(which)
        if (cur_soft, cur_hard) == (soft, hard):
            continue
        try:
            resource.setrlimit(which, (soft, hard))
            done.append(f"{name} {cur_soft}->{soft}")
        except (ValueError, OSError) as err:
            failed.append(f"{name} {soft} ({err}; the shell's hard limit is {cur_hard}): not "
                          "judged")
            untaken.add(name)
    note = f"limits of {source}"
    if done:
        note += ": " + ", ".join(done)
    if failed:
        note += "; could not take " + ", ".join(failed)
    return note, untaken
