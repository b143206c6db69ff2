"""Slurm for vetting: one allocation, concurrent srun steps, node state.

Vetting talks to Slurm directly: ``salloc --no-shell`` holds every node of the
partition in one job, and each measurement is an ``srun --jobid`` step pinned
to its nodes (``--nodelist``, ``--exclusive``), several steps at once. A ReFrame
run would submit one job per test and node pair and let the scheduler place
them; vetting needs the opposite: all nodes at once, placement chosen by us.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpcval.core.errors import CheckFailed, EnvironmentFault, InputError


def _require(prog: str) -> str:
    path = shutil.which(prog)
    if path is None:
        raise EnvironmentFault(f"'{prog}' not found: vetting needs the Slurm client commands "
                               "(apt-get install slurm-client); exit 3")
    return path


def _run(cmd: Sequence[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        raise EnvironmentFault(f"'{' '.join(cmd)}' did not answer within {timeout:.0f} s "
                               "(is slurmctld running?)") from None


def expand_hostlist(expr: str) -> list[str]:
    """``lab-n[1-3,5]`` -> names, with ``scontrol show hostnames``."""
    proc = _run([_require("scontrol"), "show", "hostnames", expr])
    if proc.returncode != 0:
        raise InputError(f"node list '{expr}': {proc.stderr.strip()} (exit 2)")
    return proc.stdout.split()


@dataclass
class NodeInfo:
    name: str
    state: str
    reason: str
    partitions: list[str]


def nodes_info(names: Sequence[str] | None = None) -> dict[str, NodeInfo]:
    proc = _run([_require("scontrol"), "show", "node", "--oneliner", *(
        [",".join(names)] if names else [])])
    if proc.returncode != 0:
        raise EnvironmentFault(f"scontrol show node: {proc.stderr.strip()} (exit 3)")
    out = {}
    for line in proc.stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "NodeName" not in fields:
            continue
        reason = line.split("Reason=", 1)[1].strip() if "Reason=" in line else ""
        out[fields["NodeName"]] = NodeInfo(fields["NodeName"], fields.get("State", "?"),
                                           reason, fields.get("Partitions", "").split(","))
    return out


def partition_nodes(partition: str) -> list[str]:
    proc = _run([_require("sinfo"), "-h", "-N", "-p", partition, "-o", "%N"])
    if proc.returncode != 0:
        raise InputError(f"partition '{partition}': {proc.stderr.strip()} (exit 2)")
    names = sorted(set(proc.stdout.split()), key=_natural)
    if not names:
        raise InputError(f"Slurm partition '{partition}' has no nodes (sinfo -p {partition}); "
                         "exit 2")
    return names


def _natural(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def topology() -> dict[str, str]:
    """node -> leaf switch from Slurm's topology (topology.conf), empty if none."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return {}
    proc = _run([scontrol, "show", "topology"])
    if proc.returncode != 0:
        return {}
    out: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        if fields.get("Level") == "0" and "Nodes" in fields and "SwitchName" in fields:
            for node in expand_hostlist(fields["Nodes"]):
                out[node] = fields["SwitchName"]
    return out


class Allocation:
    """One job holding ``nodes`` (``salloc --no-shell``), cancelled on exit."""

    def __init__(self, nodes: Sequence[str], partition: str, minutes: int,
                 extra: Sequence[str] = (), wait: int = 300) -> None:
        self.nodes = list(nodes)
        self.partition = partition
        self.minutes = minutes
        self.extra = list(extra)
        self.wait = wait
        self.job_id = ""

    def __enter__(self) -> Allocation:
        cmd = [_require("salloc"), "--no-shell", "--job-name=hpcval-vet", "--exclusive",
               f"--partition={self.partition}", f"--nodes={len(self.nodes)}",
               f"--nodelist={','.join(self.nodes)}", f"--time={self.minutes}",
               f"--immediate={self.wait}", *self.extra]
        proc = _run(cmd, timeout=self.wait + 30)
        m = re.search(r"Granted job allocation (\d+)", proc.stderr + proc.stdout)
        if proc.returncode != 0 or not m:
            raise EnvironmentFault(
                f"could not allocate {','.join(self.nodes)} in partition {self.partition} "
                f"within {self.wait} s: {proc.stderr.strip() or proc.stdout.strip()} (exit 3)")
        self.job_id = m.group(1)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.job_id:
            _run([_require("scancel"), self.job_id])

    def step(self, nodes: Sequence[str], ntasks: int, cmd: Sequence[str],
             mpi: str | None = None) -> list[str]:
        """The srun command of one step on ``nodes`` inside this allocation."""
        per_node = max(1, ntasks // len(nodes))
        return [_require("srun"), f"--jobid={self.job_id}", "--exclusive",
                f"--nodes={len(nodes)}", f"--ntasks={ntasks}",
                f"--ntasks-per-node={per_node}", f"--nodelist={','.join(nodes)}",
                "--kill-on-bad-exit=1", *([f"--mpi={mpi}"] if mpi else []), *cmd]


@dataclass
class StepResult:
    key: object
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_steps(steps: Mapping[object, list[str]], env: Mapping[str, str],
              timeout: float) -> dict[object, StepResult]:
    """Start every step at once, wait for all; a step past ``timeout`` is killed."""
    procs = {}
    t0 = time.monotonic()
    for key, cmd in steps.items():
        procs[key] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=dict(env))
    out = {}
    for key, proc in procs.items():
        left = max(1.0, timeout - (time.monotonic() - t0))
        try:
            so, se = proc.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            proc.kill()
            so, se = proc.communicate()
            se += f"\nhpcval vet: step killed after {timeout:.0f} s"
        out[key] = StepResult(key, proc.returncode, so, se, time.monotonic() - t0)
    return out


def drain(node: str, reason: str) -> None:
    """``scontrol update nodename=NODE state=drain reason=...``."""
    proc = _run([_require("scontrol"), "update", f"nodename={node}", "state=drain",
                 f"reason={reason[:250]}"])
    if proc.returncode != 0:
        raise CheckFailed(f"could not drain {node}: {proc.stderr.strip()}")


def resume(node: str) -> None:
    proc = _run([_require("scontrol"), "update", f"nodename={node}", "state=resume"])
    if proc.returncode != 0:
        raise EnvironmentFault(f"could not resume {node}: {proc.stderr.strip()} (exit 3)")


def create_reservation(name: str, nodes: Sequence[str], minutes: int, user: str) -> None:
    proc = _run([_require("scontrol"), "create", "reservation", f"reservationname={name}",
                 f"nodes={','.join(nodes)}", "starttime=now", f"duration={minutes}",
                 f"users={user}", "flags=maint,ignore_jobs"])
    if proc.returncode != 0:
        raise EnvironmentFault(f"could not reserve {','.join(nodes)} for the gate: "
                               f"{proc.stderr.strip()} (exit 3)")


def delete_reservation(name: str, timeout: float = 30.0) -> None:
    """Delete reservation ``name``; retried while the cancelled job still completes."""
    deadline = time.monotonic() + timeout
    while True:
        proc = _run([_require("scontrol"), "delete", f"reservationname={name}"])
        if proc.returncode == 0 or "not found" in proc.stderr.lower() or (
                "invalid" in proc.stderr.lower()):
            return
        if time.monotonic() > deadline:
            raise EnvironmentFault(f"could not delete reservation {name}: "
                                   f"{proc.stderr.strip()} (delete it with 'scontrol delete "
                                   f"reservationname={name}'); exit 3")
        time.sleep(1)
