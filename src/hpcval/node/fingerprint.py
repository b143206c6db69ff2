"""What a node IS, by category, for ``hpcval vet`` to compare across a partition.

:func:`fingerprint` reads ``/proc``, ``/sys`` and (as root, where installed)
``dmidecode`` under ``root`` and gives ``({category: {key: value}},
{category: [unreadable key, ...]})``, categories ``cpu, memory, firmware,
kernel, network, software, mounts``, keys and values strings. Values that
differ by nature (host names, MAC addresses, GUIDs, LIDs, serial numbers,
UUIDs, boot ids and times) are never read. A source the node does not have
(no EDAC driver, no InfiniBand, no DMI) gives no key; one that is there but
cannot be read names its key in the second map. Every reader is cheap (files
of ``/proc`` and ``/sys``, one ioctl per NIC, ``dmidecode`` once as root) and
none raises.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from hpcval.node import fingerprint_env, hwtext
from hpcval.node.sysread import UNREADABLE, Category, Values, read_opt, read_text

CATEGORIES = ("cpu", "memory", "firmware", "kernel", "network", "software", "mounts")

# -- cpu --------------------------------------------------------------------

#: the CPU keys ``/proc/cpuinfo`` gives (``cpus`` comes from the online CPUs)
_CPUINFO_KEYS = ("model", "vendor", "microcode", "flags", "sockets", "cores",
                 "threads_per_core")


def _cpu(root: Path) -> Category:
    cat = Category()
    try:
        cpuinfo = hwtext.parse_cpuinfo(read_text(root / "proc/cpuinfo"))
    except UNREADABLE:  # named below
        cpuinfo = {}
    cat.values.update({k: v for k, v in cpuinfo.items() if k in _CPUINFO_KEYS})
    if "model" not in cat.values:
        cat.unknown.append("model")
    sysdir = root / "sys/devices/system/cpu"

    def cpus() -> str:
        online = read_opt(sysdir / "online")
        if online is None and "cpus" in cpuinfo:
            return cpuinfo["cpus"]
        return str(len(hwtext.cpulist(read_text(sysdir / "online"))))

    cat.put("cpus", cpus)
    if "sockets" not in cat.values:
        cat.update("sockets", lambda: _sysfs_topology(sysdir))
    if "microcode" not in cat.values and "model" in cat.values:
        cat.put("microcode", lambda: read_opt(sysdir / "cpu0/microcode/version"))
    cat.put("max_mhz", lambda: None if (v := read_opt(sysdir / "cpu0/cpufreq/cpuinfo_max_freq"))
            is None else f"{int(v) / 1000:.0f}")
    nodes = sorted((root / "sys/devices/system/node").glob("node[0-9]*"),
                   key=lambda p: int(p.name[4:]))
    if nodes:
        cat.put("numa_nodes", lambda: str(len(nodes)))
        cat.put("numa_cpus", lambda: " | ".join(
            hwtext.cpulist_text(hwtext.cpulist(read_text(n / "cpulist"))) for n in nodes))
    return cat


def _sysfs_topology(sysdir: Path) -> Values:
    """Sockets, cores, threads per core from ``cpu*/topology`` (where
    ``/proc/cpuinfo`` does not tell them: arm64)."""
    pairs = []
    for top in sysdir.glob("cpu[0-9]*/topology"):
        pairs.append((read_text(top / "physical_package_id"), read_text(top / "core_id")))
    if not pairs:
        return {}
    cores = set(pairs)
    return {"sockets": str(len({p for p, _ in pairs})), "cores": str(len(cores)),
            "threads_per_core": str(len(pairs) // len(cores))}


# -- memory -----------------------------------------------------------------

def round_memory(kib: int) -> str:
    """``MemTotal`` (KiB) rounded up to 1/16 of the largest power of two below
    it, in GiB: the kernel and firmware keep back 1-3 % of the installed memory
    (an amount that varies a little from node to node), a step is 6-12 % of
    the total, so identical nodes give the same value and a node with one DIMM
    of eight fewer (-12.5 %) does not."""
    gib = kib / 2**20
    if gib <= 0:
        return "0 GiB"
    step = 2 ** math.floor(math.log2(gib)) / 16
    value = math.ceil(gib / step - 1e-9) * step
    return f"{value:g} GiB"


def _meminfo(root: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in read_text(root / "proc/meminfo").splitlines():
        m = re.match(r"(\w+):\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def _node_memory(node: Path) -> str:
    """A NUMA node's ``MemTotal``, rounded as the node's is."""
    m = re.search(r"MemTotal:\s+(\d+) kB", read_text(node / "meminfo"))
    if m is None:
        raise ValueError(f"{node}/meminfo: no MemTotal")
    return round_memory(int(m.group(1)))


def edac_memory(root: Path) -> Values:
    """The memory keys of the EDAC tree (``/sys/devices/system/edac/mc``):
    ``edac_mcs``, ``edac_dimms`` (populated: size above 0), ``edac_dimm_sizes``
    and ``edac_mem_type``, from ``mc*/dimm*`` (or ``rank*``) where the driver
    has them, else ``mc*/csrow*``. Nothing where there is no EDAC."""
    base = root / "sys/devices/system/edac/mc"
    mcs = sorted(base.glob("mc[0-9]*"))
    if not mcs:
        return {}
    sizes: list[str] = []
    types: list[str] = []
    sized = False  # a driver that lists no sizes (csrows of counts only) counts no DIMMs
    for mc in mcs:
        units = sorted(mc.glob("dimm[0-9]*")) or sorted(mc.glob("rank[0-9]*"))
        for unit in units:
            sized = True
            size = int(read_text(unit / "size"))
            if size > 0:
                sizes.append(f"{size} MB")
                if (unit / "dimm_mem_type").exists():
                    types.append(read_text(unit / "dimm_mem_type"))
        if not units:
            for row in sorted(mc.glob("csrow[0-9]*")):
                if not (row / "size_mb").exists():
                    continue
                sized = True
                size = int(read_text(row / "size_mb"))
                if size > 0:
                    sizes.append(f"{size} MB")
                    if (row / "mem_type").exists():
                        types.append(read_text(row / "mem_type"))
    out = {"edac_mcs": str(len(mcs))}
    if sized:
        out["edac_dimms"] = str(len(sizes))
    if sizes:
        out["edac_dimm_sizes"] = hwtext.counted(sizes)
    if types:
        out["edac_mem_type"] = hwtext.counted(types)
    return out


class _Dmidecode:
    """``dmidecode -t 0,1,2,17`` (BIOS, system, board, memory devices), run at
    most once, where it can run: as root, installed, on this node's own root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._result: str | None | Exception = ""

    def text(self) -> str | None:
        """Its output; None where it cannot run; raises where it failed."""
        if self._result == "":
            try:
                self._result = self._run()
            except (OSError, subprocess.SubprocessError) as err:
                self._result = err
        if isinstance(self._result, Exception):
            raise self._result
        return self._result

    def _run(self) -> str | None:
        if self.root != Path("/") or os.geteuid() != 0:
            return None
        if not (self.root / "sys/firmware/dmi/tables").exists():
            return None  # no SMBIOS tables (a VM without them): nothing to decode
        exe = shutil.which("dmidecode", path="/usr/sbin:/sbin:/usr/bin:/bin")
        if exe is None:
            return None
        proc = subprocess.run([exe, "-t", "0,1,2,17"], capture_output=True, text=True,
                              timeout=2, check=False)
        if proc.returncode != 0:
            raise OSError(f"dmidecode exit {proc.returncode}")
        return proc.stdout


def _memory(root: Path, dmi: _Dmidecode) -> Category:
    cat = Category()
    try:
        info = _meminfo(root)
    except UNREADABLE:  # named below
        info = {}
    if "MemTotal" in info:
        cat.values["total"] = round_memory(info["MemTotal"])
    else:
        cat.unknown.append("total")
    nodes = sorted((root / "sys/devices/system/node").glob("node[0-9]*"),
                   key=lambda p: int(p.name[4:]))
    if len(nodes) > 1:  # which socket lost its DIMM
        cat.put("numa_memory", lambda: " | ".join(_node_memory(n) for n in nodes))
    if "HugePages_Total" in info:
        cat.values["hugepages"] = (f"{info['HugePages_Total']} x "
                                   f"{info.get('Hugepagesize', 0)} kB")
    cat.update("edac", lambda: edac_memory(root))
    cat.update("dimms", lambda: hwtext.parse_dmidecode_memory(dmi.text() or ""))
    return cat


# -- firmware ---------------------------------------------------------------

#: ``/sys/class/dmi/id`` files read (serials, UUIDs and asset tags never are)
DMI_FILES = ("bios_vendor", "bios_version", "bios_date", "bios_release", "sys_vendor",
             "product_name", "product_family", "board_vendor", "board_name",
             "board_version")


def _firmware(root: Path, dmidecode: _Dmidecode) -> Category:
    cat = Category()
    dmi = root / "sys/class/dmi/id"
    if dmi.is_dir():
        for name in DMI_FILES:
            cat.put(name, lambda name=name: read_opt(dmi / name))
    else:  # a kernel without the DMI class: the tables through dmidecode, as root
        cat.update("bios", lambda: hwtext.parse_dmidecode_bios(dmidecode.text() or ""))
    return cat


# -- kernel -----------------------------------------------------------------

#: modules the fingerprint names (interconnects, GPUs, file systems, EDAC drivers)
MODULE_PREFIXES = ("mlx", "ib_", "rdma_", "hfi1", "irdma", "i40iw", "bnxt_re", "efa",
                   "cxi", "nvidia", "amdgpu", "gdrdrv", "nv_peer_mem", "lustre", "lnet",
                   "ko2iblnd", "mmfs", "nfs", "xpmem", "knem", "kfi")

#: what in a kernel command line differs by nature (UUIDs, a PXE boot's MAC,
#: addresses) and is masked
_MASKS = (
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                r"[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\bBOOTIF=\S+"), "BOOTIF=<mac>"),
    (re.compile(r"\b(?:[0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}\b"), "<mac>"),
    (re.compile(r"\bip=\S+"), "ip=<address>"),
)


def mask_cmdline(cmdline: str) -> str:
    """The command line with what differs by nature masked (``<uuid>``, ``<mac>``)."""
    for pattern, repl in _MASKS:
        cmdline = pattern.sub(repl, cmdline)
    return " ".join(cmdline.split())


def relevant_modules(proc_modules: str) -> list[str]:
    """Names of ``/proc/modules`` of :data:`MODULE_PREFIXES` or ``*_edac``, sorted."""
    names = [line.split()[0] for line in proc_modules.splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith(MODULE_PREFIXES) or n.endswith("_edac"))


def _kernel(root: Path) -> Category:
    cat = Category()
    cat.put("release", lambda: read_text(root / "proc/sys/kernel/osrelease"))
    cat.put("version", lambda: read_text(root / "proc/sys/kernel/version"))
    cat.put("cmdline", lambda: mask_cmdline(read_text(root / "proc/cmdline")))
    cat.put("tainted", lambda: read_text(root / "proc/sys/kernel/tainted"))
    modules: list[str] = []

    def loaded() -> str | None:
        text = read_opt(root / "proc/modules")  # none: a kernel without modules
        modules.extend(relevant_modules(text) if text is not None else [])
        return None if text is None else " ".join(modules)

    cat.put("modules", loaded)
    for name in modules:
        cat.put(f"module.{name}",
                lambda name=name: read_opt(root / "sys/module" / name / "version"))
    return cat


def fingerprint(root: Path = Path("/"), mounts: Sequence[str] | None = None,
                env: Mapping[str, str] | None = None,
                ) -> tuple[dict[str, Values], dict[str, list[str]]]:
    """The node's fingerprint and its unreadable keys, by category (see the
    module's doc). ``mounts``: the mount points jobs need (default: every
    mount of a storage file system); ``env``: the environment the checks run
    in (its ``PATH``'s MPI, its ``SPACK_ENV``; default this process's)."""
    env = os.environ if env is None else env
    dmi = _Dmidecode(root)
    readers: dict[str, Callable[[], Category]] = {
        "cpu": lambda: _cpu(root), "memory": lambda: _memory(root, dmi),
        "firmware": lambda: _firmware(root, dmi), "kernel": lambda: _kernel(root),
        "network": lambda: fingerprint_env.network(root),
        "software": lambda: fingerprint_env.software(root, env),
        "mounts": lambda: fingerprint_env.mounts(root, mounts)}
    values: dict[str, Values] = {}
    unknown: dict[str, list[str]] = {}
    for name, read in readers.items():
        try:
            cat = read()
        except Exception:  # noqa: BLE001 - the whole category unreadable
            cat = Category()
            cat.unknown.append("*")
        values[name] = cat.values
        if cat.unknown:
            unknown[name] = cat.unknown
    return values, unknown
