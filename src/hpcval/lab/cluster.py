"""Bring the lab up, take it down, report its status."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcval.lab import delay as delay_mod
from hpcval.lab import fabric as fabric_mod
from hpcval.lab import fileserver, network, nodeview, slurm
from hpcval.lab.layout import (
    BRIDGE,
    FILE_SERVER_NETNS,
    NODE_IFACE,
    LabLayout,
    default_state_dir,
)
from hpcval.lab.state import LabState
from hpcval.lab.system import (
    LabError,
    pid_alive,
    pid_executable,
    require_programs,
    require_root,
    stop_pid,
)

NETNS_PREFIX = "hpcval-lab-n"
LINK_PREFIX = "hvlab"


def _lab_netns(name: str) -> bool:
    return name.startswith(NETNS_PREFIX) or name == FILE_SERVER_NETNS


def layout_from_state(state: LabState, state_dir: Path) -> LabLayout:
    return LabLayout(nodes_count=max(state.nodes, 1), state_dir=state_dir,
                     subnet=state.subnet or "198.18.0.0/24", service=state.service,
                     file_server_enabled=bool(state.fileserver))


def up(nodes: int, fabric: str = "unshaped", state_dir: Path | None = None,
       log=print, service: bool = False, file_server: bool | None = None,
       delay_us: int = 0, node_views: bool = False) -> LabLayout:
    """Create the lab and wait until every node is idle in Slurm.

    ``node_views``: every compute node's slurmd in a mount namespace of its own
    with its own view of the files a node probe reads, and in a CPU cgroup of
    its own (:mod:`hpcval.lab.nodeview`).

    ``file_server``: True sets up the sshfs file server (error if sshfs or sshd
    is missing), None sets it up where they are installed, False never.
    On any failure the partial lab is taken down again before the error is raised.
    """
    require_root("up")
    require_programs("ip", "tc", "unshare", "munged", "slurmctld", "slurmd", "sinfo")
    fabric_mod.get_profile(fabric)  # fail on a bad name before creating anything
    fs_missing = fileserver.missing_reason() if file_server is not False else None
    if file_server and fs_missing:
        raise LabError(f"file server: {fs_missing}")
    with_fs = file_server is not False and fs_missing is None
    state_dir = state_dir or default_state_dir()
    layout = LabLayout(nodes_count=nodes, state_dir=state_dir, service=service,
                       file_server_enabled=with_fs)
    existing = LabState.load(layout.state_file)
    if existing is not None and abandoned(existing):
        log(f"lab: the lab recorded in {layout.state_file} has none of its daemons running "
            "(left by a run that was killed, or a copy of a machine); taking what is left "
            "of it down first")
        down(state_dir=state_dir, log=log)
        existing = None
    if existing is not None:
        raise LabError(
            f"a lab is already recorded in {layout.state_file} ({existing.nodes} nodes); "
            "run 'hpcval lab down' first"
        )
    leftovers = [n for n in network.existing_netns() if _lab_netns(n)]
    if leftovers or BRIDGE in network.existing_links():
        raise LabError(
            f"lab network objects exist without a state file ({', '.join(leftovers) or BRIDGE});"
            " run 'hpcval lab down' to remove them"
        )
    state = LabState(nodes=nodes, subnet=layout.subnet, fabric="unshaped", service=service,
                     node_views=node_views)
    state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(state_dir, 0o755)
    layout.log_dir.mkdir(parents=True, exist_ok=True)
    state.save(layout.state_file)
    try:
        log(f"lab: bridge {BRIDGE} {layout.bridge_address}/{layout.prefixlen}")
        network.create_bridge(layout, state)
        for node in layout.all_nodes:
            log(f"lab: node {node.name} netns {node.netns} {node.address} ({NODE_IFACE})")
            network.create_node(layout, node, state)
        network.add_hosts_lines(layout, state)
        cpus = slurm.node_cpus()
        slurm.write_system_file(slurm.SLURM_CONF, slurm.slurm_conf(layout, cpus),
                                state.created_files)
        state.save(layout.state_file)
        slurm.write_system_file(slurm.CGROUP_CONF, slurm.cgroup_conf(), state.created_files)
        state.save(layout.state_file)
        _record(state, layout, "munged", "munged", slurm.start_munged(layout))
        _record(state, layout, "slurmctld", "slurmctld", slurm.start_slurmctld(layout))
        compute = {n.name for n in layout.nodes}
        meminfo = Path("/proc/meminfo").read_text()
        if node_views:
            log(f"lab: node views under {layout.state_dir / 'nodes'} (/proc/cmdline, "
                "/proc/meminfo, " + ", ".join(f"/{d}" for d in nodeview.VIEW_DIRS) + ")")
        for node in layout.all_nodes:
            views = node_views and node.name in compute
            mounts = ""
            if views:
                nodeview.seed(layout, node.name, meminfo)
                mounts = nodeview.mount_script(layout, node.name)
            pid = slurm.start_slurmd(layout, node, mounts=mounts)
            _record(state, layout, f"slurmd-{node.name}", "slurmd", pid)
            if views:
                nodeview.attach_cgroup(node.name, pid)
        if with_fs:
            fileserver.start(layout, state, log=log)
        elif file_server is None:
            log(f"lab: no file server ({fs_missing})")
        if fabric != "unshaped":
            fabric_mod.apply_profile(layout, fabric)
        state.fabric = fabric
        state.save(layout.state_file)
        if delay_us:
            log(f"lab: delay {delay_mod.delay_text(delay_us)} on every link")
            delay_mod.start(layout, state, delay_us)
        log(f"lab: waiting for {len(layout.all_nodes)} node(s) to become idle ...")
        slurm.wait_idle(layout)
        state.ready = True
        state.save(layout.state_file)
        if not Path(slurm.PMI2_LIBRARY).exists():
            log(f"lab: note: {slurm.PMI2_LIBRARY} is missing, so Intel MPI cannot start "
                "through srun --mpi=pmi2 (apt-get install libpmi2-0)")
    except BaseException:
        log("lab: 'up' failed; taking the partial lab down again")
        down(state_dir=state_dir, log=log)
        raise
    return layout


def abandoned(state: LabState) -> bool:
    """A recorded lab none of whose daemons runs any more: what a killed
    session leaves behind. One still coming up has recorded no daemon yet, or
    its first one runs, so it is never taken for abandoned."""
    return bool(state.daemons) and not any(_running(info) for info in state.daemons.values())


def _running(daemon: dict) -> bool:
    """A daemon recorded as ``{"pid", "exe"}`` still runs (its PID not taken by another
    program)."""
    pid = int(daemon["pid"])
    return pid_alive(pid) and pid_executable(pid) == str(daemon["exe"])


def _record(state: LabState, layout: LabLayout, key: str, exe: str, pid: int) -> None:
    state.daemons[key] = {"pid": pid, "exe": exe}
    state.save(layout.state_file)


@dataclass
class DownReport:
    stopped: list[str] = field(default_factory=list)
    unmounted: list[str] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    lines: int = 0
    files: list[str] = field(default_factory=list)


def down(state_dir: Path | None = None, log=print) -> DownReport:
    """Undo everything ``up`` did (or the part of it that happened). Idempotent."""
    require_root("down")
    state_dir = state_dir or default_state_dir()
    state_file = state_dir / "state.json"
    state = LabState.load(state_file) or LabState()
    report = DownReport()

    # file server first: its mounts live in the slurmd's mount namespaces, and a
    # mount whose sshfs dies first would be left "not connected"
    fs_report = fileserver.stop(state, state_dir)
    report.unmounted = fs_report.unmounted
    report.stopped += fs_report.stopped

    # daemons recorded in the state file, and any whose PID file exists (a daemon
    # that started just before a failure could not be recorded)
    daemons: dict[str, tuple[int, str]] = {
        k: (int(v["pid"]), str(v["exe"])) for k, v in state.daemons.items()
    }
    for pid_file, exe in _pid_files(state_dir):
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            continue
        daemons.setdefault(pid_file.stem, (pid, exe))
    # slurmd first (they run the jobs), then the controller, munge last
    order = sorted(daemons, key=lambda k: (0 if k.startswith("slurmd") else
                                           1 if k == "slurmctld" else 2, k))
    for key in order:
        pid, exe = daemons[key]
        if stop_pid(pid, exe):
            report.stopped.append(f"{key} (pid {pid})")

    # namespaces: stop what still runs inside them (job steps left by slurmd), then delete
    names = set(state.netns) | {n for n in network.existing_netns() if _lab_netns(n)}
    for ns in sorted(names):
        if ns not in network.existing_netns():
            continue
        _stop_netns_processes(ns)
        network.run(["ip", "netns", "del", ns], check=False)
        report.netns.append(ns)

    links = set(state.links) | {lk for lk in network.existing_links()
                                if lk.startswith(LINK_PREFIX)}
    present = set(network.existing_links())
    for link in sorted(links, key=lambda x: x == BRIDGE):  # bridge last
        if link in present:
            network.run(["ip", "link", "del", link], check=False)
            report.links.append(link)

    files = {network.HOSTS: []}
    for path, lines in state.added_lines.items():
        files[Path(path)] = lines
    for path, lines in files.items():
        report.lines += network.remove_added_lines(path, lines)

    created = {Path(p) for p in state.created_files} | {slurm.SLURM_CONF, slurm.CGROUP_CONF}
    for path in sorted(created):
        if path.exists() and slurm.owned_by_lab(path):
            path.unlink()
            report.files.append(str(path))

    # a mount left in a namespace that survived (none should) would keep its
    # mount point busy: detach whatever is still there before removing files
    report.unmounted += fileserver.unmount_all(state_dir)
    for pid, targets in nodeview.leftover_mounts(state_dir).items():
        for target in sorted(targets, key=len, reverse=True):
            network.run(["nsenter", "-t", str(pid), "-m", "umount", "-l", target], check=False)
            report.unmounted.append(f"{target} (pid {pid})")
    nodeview.remove_cgroups()
    _remove_state_dir(state_dir)
    log(
        "lab: down: stopped "
        + (", ".join(report.stopped) or "no daemons")
        + f"; unmounted {len(report.unmounted)} mount(s)"
        + f"; removed {len(report.netns)} namespace(s), {len(report.links)} link(s), "
        f"{report.lines} added line(s), {len(report.files)} file(s)"
    )
    return report


def _pid_files(state_dir: Path) -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    if (state_dir / "munge" / "munged.pid").exists():
        found.append((state_dir / "munge" / "munged.pid", "munged"))
    if (state_dir / "slurmctld.pid").exists():
        found.append((state_dir / "slurmctld.pid", "slurmctld"))
    found.extend((p, "slurmd") for p in sorted(state_dir.glob("slurmd-*.pid")))
    return found


def _stop_netns_processes(ns: str) -> None:
    pids = network.netns_pids(ns)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            if pid_alive(pid):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
            time.sleep(0.1)
        pids = [p for p in pids if pid_alive(p)]
        if not pids:
            return


def _remove_state_dir(state_dir: Path) -> None:
    if not state_dir.exists():
        return
    for path in sorted(state_dir.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()
    state_dir.rmdir()


@dataclass
class NodeStatus:
    name: str
    address: str
    netns_present: bool
    slurm_state: str
    qdisc: str
    rx_bytes: int
    tx_bytes: int


@dataclass
class LabStatus:
    up: bool
    nodes: list[NodeStatus] = field(default_factory=list)
    daemons: dict[str, str] = field(default_factory=dict)
    fabric: str = ""
    #: nodes whose own link has another profile than ``fabric``
    node_fabric: dict[str, str] = field(default_factory=dict)
    state_file: str = ""
    #: the delay on every link (``fabric --delay``): ``50us``, or ``none``
    delay: str = "none"
    #: node (and file server) -> its delay daemon's figures
    delay_nodes: dict[str, str] = field(default_factory=dict)
    fileserver: fileserver.FileServerStatus | None = None
    #: node -> faults injected into its view (``up --node-views``; empty without views)
    node_views: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def status(state_dir: Path | None = None) -> LabStatus:
    state_dir = state_dir or default_state_dir()
    state = LabState.load(state_dir / "state.json")
    if state is None:
        return LabStatus(up=False, state_file=str(state_dir / "state.json"))
    layout = layout_from_state(state, state_dir)
    result = LabStatus(up=state.ready, fabric=state.fabric,
                       node_fabric=dict(state.node_fabric), state_file=str(layout.state_file),
                       delay=delay_mod.delay_text(int(state.delay.get("us") or 0)))
    for key, info in sorted(state.daemons.items()):
        pid = int(info["pid"])
        running = _running(info)
        result.daemons[key] = f"pid {pid} {'running' if running else 'NOT RUNNING'}"
        if not running:
            result.problems.append(f"{key} (pid {pid}) is not running")
    states = slurm.node_states()
    present = set(network.existing_netns())
    for node in layout.all_nodes:
        ns_ok = node.netns in present
        rx, tx = network.link_bytes(NODE_IFACE, node.netns) if ns_ok else (0, 0)
        qdisc = fabric_mod.link_qdisc(NODE_IFACE, node.netns) if ns_ok else "-"
        st = states.get(node.name, "unknown")
        result.nodes.append(NodeStatus(node.name, node.address, ns_ok, st, qdisc, rx, tx))
        if not ns_ok:
            result.problems.append(f"namespace {node.netns} is missing")
        elif st != "idle" and not st.startswith(("alloc", "mix", "comp")):
            # allocated, mixed and completing (a job just ended) are a working node
            result.problems.append(f"{node.name} is {st}")
    if state.delay:
        for node in layout.shaped_nodes:
            if node.netns in present:
                text, problems = delay_mod.node_status(layout, state, node)
                result.delay_nodes[node.name] = text
                result.problems += problems
    if state.node_views:
        result.node_views = {n.name: sorted(nodeview.load_faults(layout, n.name))
                             for n in layout.nodes}
    result.fileserver = fileserver.status(state)
    if result.fileserver is not None:
        fs = layout.file_server
        ns_ok = fs.netns in present
        result.fileserver.qdisc = fabric_mod.link_qdisc(NODE_IFACE, fs.netns) if ns_ok else "-"
        result.fileserver.rx_bytes, result.fileserver.tx_bytes = (
            network.link_bytes(NODE_IFACE, fs.netns) if ns_ok else (0, 0))
        result.problems += result.fileserver.problems
    if not state.ready:
        result.problems.append("lab is not ready ('up' did not finish)")
    return result


def _running_lab(state_dir: Path | None) -> tuple[LabState, LabLayout]:
    require_root("fabric")
    state_dir = state_dir or default_state_dir()
    state = LabState.load(state_dir / "state.json")
    if state is None or not state.ready:
        raise LabError("no lab is up (run 'hpcval lab up --nodes N' first)")
    return state, layout_from_state(state, state_dir)


def set_fabric(profile: str, state_dir: Path | None = None,
               node: str | None = None,
               link: tuple[str, str] | None = None,
               delay_us: int = 0) -> fabric_mod.FabricProfile:
    """Switch a running lab to fabric ``profile``: every link, only ``node``'s, or
    only the traffic between the two nodes of ``link``. Switching every link also
    sets the delay on every link: ``delay_us`` microseconds, none by default."""
    state, layout = _running_lab(state_dir)
    if link is not None:
        base = {n.name: state.node_fabric.get(n.name, state.fabric) for n in layout.nodes}
        prof = fabric_mod.shape_pair(layout, *link, profile, base)
        state.link_fabric[f"{link[0]}<->{link[1]}"] = prof.name
        state.save(layout.state_file)
        return prof
    prof = fabric_mod.apply_profile(layout, profile, node=node)
    touched = {n.name for n in layout.nodes} if node is None else {node}
    state.link_fabric = {k: v for k, v in state.link_fabric.items()
                         if not set(k.split("<->")) & touched}
    if node is None:
        state.fabric = prof.name
        state.node_fabric = {}
    elif prof.name == state.fabric:
        state.node_fabric.pop(node, None)
    else:
        state.node_fabric[node] = prof.name
    state.save(layout.state_file)
    if node is None:
        delay_mod.start(layout, state, delay_us)
    return prof


def views_layout(state_dir: Path | None = None) -> LabLayout:
    """The running lab's layout, if it was brought up with node views."""
    require_root("inject")
    state_dir = state_dir or default_state_dir()
    state = LabState.load(state_dir / "state.json")
    if state is None or not state.ready:
        raise LabError("no lab is up (run 'hpcval lab up --node-views --nodes N' first)")
    if not state.node_views:
        raise LabError("the lab was brought up without --node-views; 'hpcval lab down' and "
                       "'hpcval lab up --node-views'")
    return layout_from_state(state, state_dir)


def set_delay(delay_us: int, state_dir: Path | None = None) -> str:
    """Delay every packet each node sends on its lab link by ``delay_us``
    microseconds (0: no delay), the rates left as they are; returns the delay's
    name (``50us``, ``none``)."""
    state, layout = _running_lab(state_dir)
    delay_mod.start(layout, state, delay_us)
    return delay_mod.delay_text(delay_us)


def current_fabric(state_dir: Path | None = None) -> str | None:
    """The fabric profile of the running lab, or None if no lab is up."""
    state = LabState.load((state_dir or default_state_dir()) / "state.json")
    return state.fabric if state is not None and state.ready else None


def current_delay(state_dir: Path | None = None) -> str | None:
    """The delay on the running lab's links (``50us``, ``none``), None if no lab is up."""
    state = LabState.load((state_dir or default_state_dir()) / "state.json")
    if state is None or not state.ready:
        return None
    return delay_mod.delay_text(int(state.delay.get("us") or 0))


def node_fabrics(state_dir: Path | None = None) -> dict[str, str]:
    """Nodes of the running lab whose link has its own profile (``fabric --node``)."""
    state = LabState.load((state_dir or default_state_dir()) / "state.json")
    return dict(state.node_fabric) if state is not None and state.ready else {}
