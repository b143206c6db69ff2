"""Slurm and munge for the lab: configuration files and daemons."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from hpcval.lab.layout import MARKER, LabLayout, LabNode
from hpcval.lab.system import LabError, mount_entries, read_pid_file, run

SLURM_CONF = Path("/etc/slurm/slurm.conf")
#: Slurm's PMI2 library (Debian package libpmi2-0), which Intel MPI uses under srun.
PMI2_LIBRARY = "/usr/lib/x86_64-linux-gnu/libpmi2.so.0"
CGROUP_CONF = Path("/etc/slurm/cgroup.conf")
HEADER = f"{MARKER}: written by 'hpcval lab up', removed by 'hpcval lab down'\n"


def node_cpus() -> int:
    """CPUs each lab node declares: all CPUs this process may use (nodes share them)."""
    return max(1, len(os.sched_getaffinity(0)))


def slurm_conf(layout: LabLayout, cpus: int) -> str:
    d = layout.state_dir
    nodes = "\n".join(
        f"NodeName={n.name} NodeAddr={n.address} NodeHostname={n.name} CPUs={cpus} "
        f"RealMemory=1024 State=UNKNOWN"
        for n in layout.nodes
    )
    svc = layout.service_node
    if svc is not None:
        nodes += (f"\nNodeName={svc.name} NodeAddr={svc.address} NodeHostname={svc.name} "
                  "CPUs=1 RealMemory=1024 State=UNKNOWN")
        nodes += (f"\nPartitionName=service Nodes={svc.name} Default=NO MaxTime=INFINITE "
                  "State=UP")
    return HEADER + f"""\
ClusterName=hpcvallab
SlurmctldHost={layout.controller_host}({layout.bridge_address})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={layout.munge_socket}
StateSaveLocation={d}/slurmctld
SlurmdSpoolDir={d}/slurmd/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={layout.log_dir}/slurmctld.log
SlurmdLogFile={layout.log_dir}/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
# each node declares its own CPU count; the nodes share this machine's CPUs
SlurmdParameters=config_overrides
# several slurmd on one kernel: track processes by parentage, no cgroups
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmi2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MailProg=/bin/true
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
KillWait=5
{nodes}
PartitionName=lab Nodes={layout.nodelist} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
"""


def cgroup_conf() -> str:
    return HEADER + "CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n"


def owned_by_lab(path: Path) -> bool:
    try:
        return path.read_text().startswith(MARKER)
    except OSError:
        return False


def write_system_file(path: Path, text: str, created: list[str]) -> None:
    """Write ``path`` unless someone else's file is there; record it in ``created``."""
    if path.exists() and not owned_by_lab(path):
        raise LabError(
            f"{path} exists and was not written by hpcval; the lab will not overwrite a "
            "real Slurm configuration (move it away to use the lab on this machine)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    if str(path) not in created:
        created.append(str(path))
    path.write_text(text)


def start_munged(layout: LabLayout) -> int:
    """Start a munged of the lab's own, with its own key and socket."""
    mdir = layout.munge_dir
    mdir.mkdir(parents=True, exist_ok=True)
    os.chmod(mdir, 0o700)
    key = mdir / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
    run(
        [
            "munged",
            "--force",
            f"--socket={layout.munge_socket}",
            f"--key-file={key}",
            f"--pid-file={mdir / 'munged.pid'}",
            f"--log-file={layout.log_dir / 'munged.log'}",
            f"--seed-file={mdir / 'munged.seed'}",
        ]
    )
    return read_pid_file(mdir / "munged.pid")


def start_slurmctld(layout: LabLayout) -> int:
    (layout.state_dir / "slurmctld").mkdir(parents=True, exist_ok=True)
    run(["slurmctld", "-f", str(SLURM_CONF)])
    return read_pid_file(layout.state_dir / "slurmctld.pid")


#: mount options that are not a cgroup v1 hierarchy's controllers
_MOUNT_FLAGS = {"rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec",
                "strictatime", "nodiratime"}


def cgroup_mounts(mountinfo: str | None = None) -> str:
    """Shell commands that mount this machine's cgroup file systems again under
    ``/sys/fs/cgroup``, for a process whose ``/sys`` was mounted afresh.

    ``ip netns exec`` mounts a new ``/sys`` for the network namespace, without the
    cgroup file systems, so on a lab node a process cannot read its own cgroup
    (``/proc/self/cgroup`` names it, ``/sys/fs/cgroup/...`` is empty); on a cluster
    node it can, and ``hpcval health`` reads the kernel's throttle count there
    (docs/vet.md, "A gate that cannot drain in a storm"). The same hierarchies
    are mounted again (a cgroup v1 controller or cgroup v2 has one hierarchy per
    kernel), so a node sees the cgroups the lab puts it in. Empty where this
    machine mounts none there."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return ""
    cmds: list[str] = []
    for target, fstype, opts in mount_entries(mountinfo):
        if target == "/sys/fs/cgroup" and fstype == "tmpfs":
            cmds.append("mount -t tmpfs -o mode=755 hpcval-lab-cgroup /sys/fs/cgroup")
        elif target == "/sys/fs/cgroup" and fstype == "cgroup2":
            cmds.append("mount -t cgroup2 cgroup2 /sys/fs/cgroup")
        elif target.startswith("/sys/fs/cgroup/") and fstype == "cgroup":
            ctl = [o for o in opts.split(",") if o not in _MOUNT_FLAGS]
            if ctl and "/" not in target[len("/sys/fs/cgroup/"):]:
                cmds.append(f"mkdir -p {target} && mount -t cgroup -o {','.join(ctl)} "
                            f"cgroup {target}")
        elif target.startswith("/sys/fs/cgroup/") and fstype == "cgroup2":
            cmds.append(f"mkdir -p {target} && mount -t cgroup2 cgroup2 {target}")
    return " && ".join(cmds)


def start_slurmd(layout: LabLayout, node: LabNode, mounts: str = "") -> int:
    """Start the node's slurmd in its network namespace and its own UTS namespace,
    so that programs on the node see the node's host name (MPI libraries group
    ranks into nodes by host name), with this machine's cgroup file systems
    mounted where a node has them (:func:`cgroup_mounts`). ``mounts``: shell
    commands run first in a mount namespace of the node's own, private
    propagation (the node views, :mod:`hpcval.lab.nodeview`)."""
    (layout.state_dir / "slurmd" / node.name).mkdir(parents=True, exist_ok=True)
    script = f"hostname {node.name} && exec slurmd -f {SLURM_CONF} -N {node.name}"
    cgroups = cgroup_mounts()
    if cgroups:
        # a failed mount leaves the node without its cgroups, as before; it still starts
        script = f"{{ {cgroups}; }} 2>/dev/null; {script}"
    unshare = ["unshare", "--uts"]
    if mounts:
        script = f"{mounts} && {script}"
        unshare += ["--mount", "--propagation", "private"]
    run([*unshare, "sh", "-c", script], netns=node.netns)
    return read_pid_file(layout.state_dir / f"slurmd-{node.name}.pid")


def node_states() -> dict[str, str]:
    """Node name -> Slurm state (``sinfo``), empty if the controller does not answer."""
    try:
        proc = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"],
            capture_output=True, text=True, timeout=10, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if proc.returncode != 0:
        return {}
    states: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def wait_idle(layout: LabLayout, timeout: float = 90.0) -> dict[str, str]:
    names = {n.name for n in layout.all_nodes}
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = node_states()
        if names <= states.keys() and all(states[n] == "idle" for n in names):
            return states
        time.sleep(1)
    shown = ", ".join(f"{n}={states.get(n, 'absent')}" for n in sorted(names))
    raise LabError(
        f"lab nodes not idle after {timeout:.0f} s ({shown}); see logs in {layout.log_dir}"
    )
