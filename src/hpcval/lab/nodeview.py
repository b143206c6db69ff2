"""Per-node views of the files a node probe reads, and faults injected into them.

With ``hpcval lab up --node-views`` every compute node's ``slurmd`` starts in a
mount namespace of its own (``unshare --mount --propagation private`` inside the
node's network namespace), where these paths are bind mounts of real files and
directories under the lab's state directory, ``<state>/nodes/<node>/view/``:

* ``/proc/cmdline`` and ``/proc/meminfo`` (files; ``meminfo`` is a copy of the
  machine's, rewritten with the node's ``MemTotal`` when a fault is injected or
  cleared and by ``hpcval lab views --refresh``: between those its other lines
  are the machine's as of the last rewrite);
* ``/sys/class/dmi/id``, ``/sys/devices/system/edac`` and
  ``/sys/class/infiniband`` (directories, in the kernel's sysfs layout: DMI
  identification, EDAC memory controllers with their DIMMs and error counts, one
  InfiniBand HCA with its port and port counters). Where such a directory does
  not exist on this kernel (a VM has no EDAC or HCA), the nearest existing
  parent is covered by an overlay on the real sysfs directory, so everything
  else in it stays the kernel's own.

Every node is seeded identical at ``up``; writing into a node's view from the
machine changes what that node (its slurmd and every job step) reads. The probe
reads ``/proc`` and ``/sys`` as it does on any node. Each node's slurmd is also
put into a CPU cgroup of its own, so a CPU quota can throttle one node.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

from hpcval.lab.layout import LabLayout, LabNode
from hpcval.lab.system import LabError

#: Files bind-mounted one by one (so rewritten in place, never replaced).
VIEW_FILES = ("proc/cmdline", "proc/meminfo")
#: Directories bind-mounted (entries in them may be added and removed).
VIEW_DIRS = ("sys/class/dmi/id", "sys/devices/system/edac", "sys/class/infiniband")

#: DIMMs on memory controller mc0 of the seeded EDAC layout.
DIMMS = 8
HCA = "mlx5_0"
#: Firmware of the seeded HCA, and the older one the ``hca-firmware`` fault installs.
HCA_FIRMWARE = "20.39.1002"
OLD_HCA_FIRMWARE = "20.31.1014"
#: Kernel argument the ``cmdline`` fault appends.
CMDLINE_EXTRA = "mitigations=off"

FAULTS = {
    "cmdline": f"kernel command line changed (appends '{CMDLINE_EXTRA}')",
    "dimm": "one DIMM fewer: MemTotal 7/8 and the last EDAC dimm of mc0 removed",
    "hca-firmware": f"older HCA firmware ({HCA} fw_ver {OLD_HCA_FIRMWARE})",
    "ib-symbol-errors": f"{HCA} port 1 symbol_error counter raised by --count (default 100)",
    "ecc-corrected": "EDAC mc0 ce_count (and dimm0's) raised by --count (default 100)",
    "ecc-uncorrected": "EDAC mc0 ue_count (and dimm0's) raised by --count (default 1)",
    "cpu-throttle": "CPU quota on the node's cgroup: half of its share of the machine's CPUs",
}
COUNTER_FAULTS = {"ib-symbol-errors": 100, "ecc-corrected": 100, "ecc-uncorrected": 1}

DMI = {
    "bios_vendor": "American Megatrends Inc.", "bios_version": "3.4",
    "bios_date": "12/07/2020", "bios_release": "5.14",
    "sys_vendor": "Supermicro", "product_name": "SYS-6019U-TR4",
    "product_family": "SMC X11", "board_vendor": "Supermicro", "board_name": "X11DPU",
    "board_version": "1.10", "chassis_vendor": "Supermicro", "chassis_type": "17",
}
IB_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
               "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
               "port_xmit_discards", "port_xmit_constraint_errors",
               "port_rcv_constraint_errors", "local_link_integrity_errors",
               "excessive_buffer_overrun_errors", "VL15_dropped")


def node_dir(layout: LabLayout, node: str) -> Path:
    return layout.state_dir / "nodes" / node


def view_dir(layout: LabLayout, node: str) -> Path:
    return node_dir(layout, node) / "view"


def _write(path: Path, text: str) -> None:
    """Write ``path`` in place (a bind-mounted file keeps its inode): the new
    text from offset 0, then cut to its length, so a reader never sees it empty."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o444)
    try:
        os.write(fd, data)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def _meminfo(real: str, scale: tuple[int, int]) -> str:
    """The machine's ``meminfo`` with ``MemTotal`` multiplied by ``scale`` (num, den);
    the memory taken away is taken from ``MemFree`` and ``MemAvailable`` too (it
    would have been free), so neither exceeds the total."""
    removed = 0
    for line in real.splitlines():
        if line.startswith("MemTotal:"):
            total = int(line.split()[1])
            removed = total - total * scale[0] // scale[1]
    out = []
    for line in real.splitlines():
        key = line.split(":", 1)[0]
        if removed and key in ("MemTotal", "MemFree", "MemAvailable"):
            kb = max(0, int(line.split()[1]) - removed)
            line = f"{key + ':':<16}{kb:>8} kB"
        out.append(line)
    return "\n".join(out) + "\n"


def _mem_total_mb(meminfo: str) -> int:
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise LabError("/proc/meminfo has no MemTotal line")


def _dimm(path: Path, index: int, size_mb: int) -> None:
    files = {
        "size": str(size_mb), "dimm_label": f"CPU_SrcID#0_MC#0_Chan#{index}_DIMM#0",
        "dimm_location": f"channel {index} slot 0 ", "dimm_mem_type": "Registered-DDR4",
        "dimm_dev_type": "x4", "dimm_edac_mode": "SECDED", "dimm_ce_count": "0",
        "dimm_ue_count": "0",
    }
    for name, value in files.items():
        _write(path / name, value + "\n")


def seed(layout: LabLayout, node: str, meminfo: str | None = None) -> Path:
    """Write ``node``'s view, identical for every node, from this machine's
    ``/proc/cmdline`` and ``/proc/meminfo`` (or ``meminfo``, read once for all
    nodes) and the seeded sysfs layout."""
    view = view_dir(layout, node)
    meminfo = Path("/proc/meminfo").read_text() if meminfo is None else meminfo
    _write(view / "proc/cmdline", Path("/proc/cmdline").read_text())
    _write(view / "proc/meminfo", meminfo)
    for name, value in DMI.items():
        _write(view / "sys/class/dmi/id" / name, value + "\n")
    dimm_mb = max(1, _mem_total_mb(meminfo) // DIMMS)
    mc = view / "sys/devices/system/edac/mc/mc0"
    for name, value in {"mc_name": "Skylake Socket#0 IMC#0", "size_mb": str(dimm_mb * DIMMS),
                        "ce_count": "0", "ue_count": "0", "ce_noinfo_count": "0",
                        "ue_noinfo_count": "0", "seconds_since_reset": "0"}.items():
        _write(mc / name, value + "\n")
    for i in range(DIMMS):
        _dimm(mc / f"dimm{i}", i, dimm_mb)
    hca = view / "sys/class/infiniband" / HCA
    for name, value in {"fw_ver": HCA_FIRMWARE, "hca_type": "MT4123",
                        "board_id": "MT_0000000223", "node_type": "1: CA"}.items():
        _write(hca / name, value + "\n")
    port = hca / "ports/1"
    for name, value in {"state": "4: ACTIVE", "phys_state": "5: LinkUp",
                        "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand",
                        "lid": "0x1"}.items():
        _write(port / name, value + "\n")
    for name in IB_COUNTERS:
        _write(port / "counters" / name, "0\n")
    _save_faults(layout, node, {})
    return view


def _overlay_parents() -> list[tuple[str, str]]:
    """(target, existing ancestor) for each view directory missing on this kernel."""
    found = []
    for rel in VIEW_DIRS:
        target = Path("/", rel)
        if target.exists():
            continue
        parent = target.parent
        while not parent.exists():
            parent = parent.parent
        found.append((str(target), str(parent)))
    return found


def mount_script(layout: LabLayout, node: str) -> str:
    """Shell commands, run in the node's new mount namespace before its slurmd
    starts, that put the node's view over ``/proc`` and ``/sys``."""
    view = view_dir(layout, node)
    ovl = node_dir(layout, node) / "overlay"
    lines = ["set -e"]
    for rel in VIEW_FILES:
        lines.append(f"mount --bind {shlex.quote(str(view / rel))} /{rel}")
    done: set[str] = set()
    for target, parent in _overlay_parents():
        if parent not in done:
            key = parent.strip("/").replace("/", "_")
            up, work = ovl / key / "upper", ovl / key / "work"
            up.mkdir(parents=True, exist_ok=True)
            work.mkdir(parents=True, exist_ok=True)
            lines.append(f"mount -t overlay hpcval-lab-view -o lowerdir={parent},"
                         f"upperdir={up},workdir={work} {parent}")
            done.add(parent)
        lines.append(f"mkdir -p {target}")
    for rel in VIEW_DIRS:
        lines.append(f"mount --bind {shlex.quote(str(view / rel))} /{rel}")
    return " && ".join(lines[1:])


# -- the node's CPU cgroup ---------------------------------------------------------

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


def _cgroup_v2() -> bool:
    return (CGROUP_ROOT / "cgroup.controllers").exists()


def cgroup_dir(node: str) -> Path:
    base = CGROUP_ROOT if _cgroup_v2() else CGROUP_ROOT / "cpu"
    return base / "hpcval-lab" / node


def attach_cgroup(node: str, pid: int) -> Path:
    """Move ``pid`` (the node's slurmd) into the node's own CPU cgroup; every job
    step it starts afterwards is in it too."""
    d = cgroup_dir(node)
    if _cgroup_v2():
        top = d.parent
        top.mkdir(exist_ok=True)
        for sub in (CGROUP_ROOT, top):
            ctl = sub / "cgroup.subtree_control"
            if "cpu" not in ctl.read_text().split():
                ctl.write_text("+cpu")
    elif not d.parent.parent.is_dir():
        raise LabError(f"{d.parent.parent}: no cgroup v1 'cpu' hierarchy mounted; the "
                       "node views need one to throttle a node (mount it, or use cgroup v2)")
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup.procs").write_text(f"{pid}\n")
    return d


def set_cpu_quota(node: str, cpus: float | None) -> None:
    """Limit the node's cgroup to ``cpus`` CPUs (None: no limit)."""
    d = cgroup_dir(node)
    if not d.is_dir():
        raise LabError(f"{node} has no CPU cgroup ({d}); bring the lab up with --node-views")
    if _cgroup_v2():
        text = "max" if cpus is None else f"{max(1000, int(cpus * PERIOD_US))} {PERIOD_US}"
        (d / "cpu.max").write_text(text)
        return
    (d / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    quota = -1 if cpus is None else max(1000, int(cpus * PERIOD_US))
    (d / "cpu.cfs_quota_us").write_text(str(quota))


def remove_cgroups() -> list[str]:
    """Remove the lab's node cgroups (their processes moved to the root first)."""
    removed: list[str] = []
    top = cgroup_dir("x").parent
    if not top.is_dir():
        return removed
    root_procs = top.parent / "cgroup.procs"
    for d in sorted(p for p in top.iterdir() if p.is_dir()):
        try:
            for pid in (d / "cgroup.procs").read_text().split():
                try:
                    root_procs.write_text(pid)
                except OSError:
                    pass  # gone meanwhile
            d.rmdir()
            removed.append(str(d))
        except OSError:
            continue
    try:
        top.rmdir()
    except OSError:
        pass
    return removed


# -- faults ---------------------------------------------------------------------

def _faults_file(layout: LabLayout, node: str) -> Path:
    return node_dir(layout, node) / "faults.json"


def load_faults(layout: LabLayout, node: str) -> dict[str, object]:
    try:
        return dict(json.loads(_faults_file(layout, node).read_text()))
    except (OSError, ValueError):
        return {}


def _save_faults(layout: LabLayout, node: str, faults: dict[str, object]) -> None:
    path = _faults_file(layout, node)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(faults, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)


def check_node(layout: LabLayout, node: str) -> LabNode:
    names = {n.name: n for n in layout.nodes}
    if node not in names:
        raise LabError(f"node '{node}': not a compute node of the lab "
                       f"({layout.nodelist}); give one of those")
    if not view_dir(layout, node).is_dir():
        raise LabError(f"{node} has no view (the lab was brought up without --node-views); "
                       "'hpcval lab down' and 'hpcval lab up --node-views'")
    return names[node]


def refresh_meminfo(layout: LabLayout) -> None:
    """Rewrite every node's ``meminfo`` from the machine's, with its MemTotal fault."""
    real = Path("/proc/meminfo").read_text()
    for n in layout.nodes:
        view = view_dir(layout, n.name)
        if view.is_dir():
            scale = (DIMMS - 1, DIMMS) if load_faults(layout, n.name).get("dimm") else (1, 1)
            _write(view / "proc/meminfo", _meminfo(real, scale))


def _add(path: Path, count: int) -> int:
    value = int(path.read_text().strip() or 0) + count
    _write(path, f"{value}\n")
    return value


def inject(layout: LabLayout, node: str, fault: str, count: int | None = None,
           cpus: float | None = None) -> str:
    """Inject ``fault`` into ``node``'s view; returns one line saying what changed.
    ``cpus``: the ``cpu-throttle`` quota in CPUs (default half the node's share)."""
    check_node(layout, node)
    if fault not in FAULTS:
        raise LabError(f"fault '{fault}': unknown; one of {', '.join(FAULTS)}")
    if count is not None and fault not in COUNTER_FAULTS:
        raise LabError(f"--count is for the counter faults ({', '.join(COUNTER_FAULTS)}), "
                       f"not '{fault}'")
    if cpus is not None and (fault != "cpu-throttle" or not 0.01 <= cpus <= 1024):
        raise LabError(f"--cpus {cpus}: for cpu-throttle only, a number of CPUs from 0.01")
    view = view_dir(layout, node)
    faults = load_faults(layout, node)
    mc = view / "sys/devices/system/edac/mc/mc0"
    port = view / "sys/class/infiniband" / HCA / "ports/1"
    if fault == "cmdline":
        base = Path("/proc/cmdline").read_text().strip()
        _write(view / "proc/cmdline", f"{base} {CMDLINE_EXTRA}\n")
        text = f"/proc/cmdline ends with '{CMDLINE_EXTRA}'"
    elif fault == "dimm":
        last = mc / f"dimm{DIMMS - 1}"
        if last.is_dir():
            shutil.rmtree(last)
        size = int((mc / "dimm0/size").read_text())
        _write(mc / "size_mb", f"{size * (DIMMS - 1)}\n")
        text = f"MemTotal {DIMMS - 1}/{DIMMS}, {mc.name}/dimm{DIMMS - 1} removed"
    elif fault == "hca-firmware":
        _write(view / "sys/class/infiniband" / HCA / "fw_ver", OLD_HCA_FIRMWARE + "\n")
        text = f"{HCA} fw_ver {OLD_HCA_FIRMWARE}"
    elif fault == "cpu-throttle":
        share = len(os.sched_getaffinity(0)) / len(layout.nodes)
        quota = share / 2 if cpus is None else cpus
        set_cpu_quota(node, quota)
        faults["cpu-throttle"] = quota
        text = (f"CPU quota {quota:.3g} CPU (its share of the machine's CPUs: {share:.3g}) "
                f"on {cgroup_dir(node)}")
    else:
        n = COUNTER_FAULTS[fault] if count is None else count
        if n < 1:
            raise LabError(f"--count {n}: give a positive number")
        if fault == "ib-symbol-errors":
            value = _add(port / "counters/symbol_error", n)
            text = f"{HCA} port 1 symbol_error +{n} = {value}"
        else:
            kind = "ce" if fault == "ecc-corrected" else "ue"
            value = _add(mc / f"{kind}_count", n)
            _add(mc / f"dimm0/dimm_{kind}_count", n)
            text = f"{mc.name} {kind}_count +{n} = {value}"
    faults.setdefault(fault, True)
    _save_faults(layout, node, faults)
    refresh_meminfo(layout)
    return f"{node}: {fault}: {text}"


def clear(layout: LabLayout, node: str, reset_counters: bool = False) -> str:
    """Undo the faults on ``node``: its view like every other node's again, the
    CPU quota lifted. Error counters keep their values (they are cumulative, as on
    a real node: they stop rising) unless ``reset_counters`` (as a reboot would)."""
    check_node(layout, node)
    view = view_dir(layout, node)
    mc = view / "sys/devices/system/edac/mc/mc0"
    port = view / "sys/class/infiniband" / HCA / "ports/1/counters"
    kept = {p: p.read_text() for p in
            [mc / "ce_count", mc / "ue_count", *port.iterdir(),
             *mc.glob("dimm*/dimm_*_count")]} if not reset_counters else {}
    faults = load_faults(layout, node)
    seed(layout, node)
    for path, text in kept.items():
        if path.exists():
            _write(path, text)
    if cgroup_dir(node).is_dir():
        set_cpu_quota(node, None)
    refresh_meminfo(layout)
    return f"{node}: cleared {', '.join(sorted(faults)) or 'nothing (no fault injected)'}" + (
        "; counters reset" if reset_counters else "; counters kept")


def leftover_mounts(state_dir: Path) -> dict[int, list[str]]:
    """Mounts of node views (bind mounts and overlays) still present in any mount
    namespace: PID inside it -> mount points. Empty after a clean ``down``."""
    marker = f"{state_dir.name}/nodes/"
    found: dict[int, list[str]] = {}
    seen: set[str] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ns = os.readlink(entry / "ns/mnt")
            if ns in seen:
                continue
            seen.add(ns)
            text = (entry / "mountinfo").read_text()
        except OSError:
            continue
        targets = [f[4] for f in (ln.split() for ln in text.splitlines())
                   if len(f) > 4 and (marker in f[3] or any(marker in x for x in f[5:]))]
        if targets:
            found[int(entry.name)] = targets
    return found
