"""Slurm for vetting: one allocation, a handful of srun steps, node state.

Vetting talks to Slurm directly: ``salloc --no-shell`` holds every node of the
partition in one job, and each measurement is **one** ``srun --jobid`` step over
the nodes it measures, whatever their number: the ranks are placed one by one
from a host file (``SLURM_HOSTFILE`` with ``--distribution=arbitrary``), so rank
order is chosen by us (the pairs of a round are ranks 0-1, 2-3, ...). Steps run
one after the other: one ``srun`` process alive at a time, two pipes, however
large the partition. A ReFrame run would submit one job per test and node pair
and let the scheduler place them; vetting needs the opposite: all nodes at
once, placement chosen by us.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcval.core.errors import EnvironmentFault, InputError


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


#: A Slurm node name as hpcval takes one (a host name: letters, digits, '-', '_', '.').
NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def check_node_name(name: str, source: str) -> str:
    """``name`` where it is a node name; else wrong input naming ``source`` (exit 2)."""
    if not NODE_NAME.fullmatch(name):
        raise InputError(f"{source} {name!r}: not a node name (letters, digits, '-', '_', "
                         "'.', at most 64, starting with a letter or digit); exit 2")
    return name


def _natural(name: str) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


#: Slurm's default ``MaxStepCount`` (slurm.conf): steps one job may start
DEFAULT_MAX_STEP_COUNT = 40000


def max_step_count() -> int:
    """``MaxStepCount`` of the cluster (``scontrol show config``); Slurm's default
    when scontrol does not say."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return DEFAULT_MAX_STEP_COUNT
    proc = _run([scontrol, "show", "config"])
    if proc.returncode != 0:
        return DEFAULT_MAX_STEP_COUNT
    m = re.search(r"^MaxStepCount\s*=\s*(.*?)\s*$", proc.stdout, re.MULTILINE)
    if m is None:
        return DEFAULT_MAX_STEP_COUNT
    if not re.fullmatch(r"[0-9]+", m.group(1)) or int(m.group(1)) < 1:
        raise InputError(f"scontrol show config: MaxStepCount = {m.group(1)!r}: not a "
                         "positive whole number (slurm.conf's MaxStepCount: the steps one job "
                         "may start); fix slurm.conf; exit 2")
    return int(m.group(1))


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
        #: srun steps started in this allocation
        self.steps = 0
        #: each step's name and seconds, in order
        self.step_seconds: list[tuple[str, float]] = []
        #: steps srun asked for and Slurm did not create: name and srun's words
        self.refused: list[tuple[str, str]] = []

    def __enter__(self) -> Allocation:
        # --no-kill: a node that fails leaves the job running on the others, so the
        # rounds after it go on without it (docs/vet.md, "A node lost during the vetting")
        cmd = [_require("salloc"), "--no-shell", "--job-name=hpcval-vet", "--exclusive",
               "--no-kill",
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

    def step(self, hosts: Sequence[str], cmd: Sequence[str], hostfile: Path,
             mpi: str | None = None, independent: bool = False) -> tuple[list[str],
                                                                         dict[str, str]]:
        """The srun command (and the environment it adds) of one step with one task
        per entry of ``hosts``, task i on ``hosts[i]`` (a node listed twice runs two
        tasks): the host file is written to ``hostfile`` and handed to srun with
        ``--distribution=arbitrary``. An MPI world (``independent`` False) ends
        when one of its tasks fails; ``independent`` tasks go on without it, and
        their output lines carry their task number (``--label``). Every task runs
        with the node's own resource limits (``--propagate=NONE``), not those of the
        shell that started the vetting: the probe's tuning audit reads the node."""
        nodes = list(dict.fromkeys(hosts))
        hostfile.write_text("".join(f"{h}\n" for h in hosts))
        # --overlap, not --exclusive: the steps run one at a time anyway, and once
        # Slurm removed a failed node from the job (--no-kill), 22.05 no longer
        # frees an exclusive step's CPUs ("unable to update job's core use
        # information due to job resizing"): every later --exclusive step waited
        # for "Requested nodes are busy" until killed
        cmd = [_require("srun"), f"--jobid={self.job_id}", "--overlap",
               # the host file is the node list: --nodelist would override it
               f"--nodes={len(nodes)}", f"--ntasks={len(hosts)}", "--distribution=arbitrary",
               *(["--label"] if independent else []),
               f"--kill-on-bad-exit={int(not independent)}", "--propagate=NONE",
               *([f"--mpi={mpi}"] if mpi else ["--mpi=none"]), *cmd]
        return cmd, {"SLURM_HOSTFILE": str(hostfile)}

    def run(self, key: str, hosts: Sequence[str], cmd: Sequence[str], env: Mapping[str, str],
            timeout: float, workdir: Path, mpi: str | None = None,
            independent: bool = False) -> StepResult:
        """Run one step (:meth:`step`) to its end; past ``timeout`` it is killed."""
        full, extra = self.step(hosts, cmd, workdir / f"hosts-{key}", mpi, independent)
        res = run_step(key, full, {**env, **extra}, timeout)
        if res.created:  # a step Slurm refused (the job gone) is no step of the job
            self.steps += 1
            self.step_seconds.append((key, round(res.seconds, 1)))
        else:
            self.refused.append((key, res.why_refused()))
        return res


#: node states in which a node is lost to the vetting (``scontrol show node``)
DEAD_STATES = ("DOWN", "FAIL", "NOT_RESPONDING", "POWER")

#: srun's words when Slurm created no step (the job ended, the allocation is gone)
_NO_STEP = ("Unable to create step", "Unable to confirm allocation", "Invalid job id",
            "Job/step already completing or completed")


@dataclass
class StepResult:
    key: object
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def created(self) -> bool:
        """Whether Slurm created the step: srun says so when it did not."""
        return not (self.returncode != 0 and any(w in self.stderr for w in _NO_STEP))

    def why_refused(self) -> str:
        lines = [ln.strip() for ln in self.stderr.splitlines()
                 if any(w in ln for w in _NO_STEP)]
        return lines[0][:300] if lines else f"srun exit {self.returncode}"


#: srun's lines that name the node a step failed on (the node, not the reporter:
#: ``slurmstepd: error: *** STEP 5.3 ON lab-n1 CANCELLED ...`` names where it was said)
_NODE_ERROR = (
    re.compile(r"failed on node ([\w.-]+)"),
    re.compile(r"[Nn]ode failure on ([\w.-]+)"),
    re.compile(r"^srun: error: ([\w.-]+): tasks? [\d,-]+: "),
)


def first_node_error(stderr: str, nodes: Sequence[str]) -> tuple[str, str] | None:
    """(node, srun's line) of the first line of a step's stderr that names one of
    ``nodes`` as failed: ``Task launch for StepId=7.4 failed on node lab-n9: ...``,
    not the later ``lab-n8: task 9: Killed`` of the world it took down."""
    names = set(nodes)
    lines = [ln.strip() for ln in stderr.splitlines()]
    # Slurm's own word on a node (launch failed, node failure) first, then the
    # first task it reports ended: the tasks it killed with the world come after
    for rx in _NODE_ERROR:
        for line in lines:
            m = rx.search(line)
            if m and m.group(1) in names:
                return m.group(1), line[:300]
    return None


def run_step(key: object, cmd: Sequence[str], env: Mapping[str, str],
             timeout: float) -> StepResult:
    """Run one srun step to its end; past ``timeout`` it is killed (srun passes
    the signal on to the step's tasks)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(env))
    try:
        so, se = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        so, se = proc.communicate()
        se += f"\nhpcval vet: step killed after {timeout:.0f} s"
    return StepResult(key, proc.returncode, so, se, time.monotonic() - t0)


def by_task(text: str) -> dict[int, list[str]]:
    """The lines of ``srun --label`` output, per task (``  3: text`` -> task 3)."""
    out: dict[int, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(\d+): (.*)$", line)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def drain(node: str, reason: str) -> None:
    """``scontrol update nodename=NODE state=drain reason=...``, the reason whole on
    one line (Slurm 22.05 kept a 3,004-character reason whole on the lab)."""
    one_line = " ".join(reason.split())
    proc = _run([_require("scontrol"), "update", f"nodename={node}", "state=drain",
                 f"reason={one_line}"])
    if proc.returncode != 0:
        raise EnvironmentFault(f"could not drain {node}: {proc.stderr.strip()} (exit 3)")


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
