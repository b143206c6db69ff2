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

import array
import fcntl
import hashlib
import json
import math
import os
import re
import shutil
import socket
import struct
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from hpcval.node import hwtext

CATEGORIES = ("cpu", "memory", "firmware", "kernel", "network", "software", "mounts")

Values = dict[str, str]


class _Category:
    """One category's values and unreadable keys."""

    def __init__(self) -> None:
        self.values: Values = {}
        self.unknown: list[str] = []

    def put(self, key: str, read: Callable[[], str | None]) -> None:
        """``read()``: the value, or None when the node has no such source;
        an exception names ``key`` unreadable."""
        try:
            value = read()
        except Exception:  # noqa: BLE001 - a reader never raises: the key is unknown
            self.unknown.append(key)
            return
        if value is not None:
            self.values[key] = value

    def update(self, key: str, read: Callable[[], Values]) -> None:
        """Several keys at once (``key`` names them when ``read`` fails)."""
        try:
            self.values.update(read())
        except Exception:  # noqa: BLE001
            self.unknown.append(key)


def _text(path: Path) -> str:
    return path.read_text(errors="replace").strip()


def _opt(path: Path) -> str | None:
    """The file's text, None when it does not exist (unreadable: raises)."""
    if not path.exists():
        return None
    return _text(path)


# -- cpu --------------------------------------------------------------------

def _cpu(root: Path) -> _Category:
    cat = _Category()
    cpuinfo: Values = {}
    cat.update("model", lambda: cpuinfo.update(hwtext.parse_cpuinfo(
        _text(root / "proc/cpuinfo"))) or {})
    for key in ("model", "vendor", "microcode", "flags", "sockets", "cores",
                "threads_per_core"):
        if key in cpuinfo:
            cat.values[key] = cpuinfo[key]
    if "model" not in cat.values and "model" not in cat.unknown:
        cat.unknown.append("model")
    sysdir = root / "sys/devices/system/cpu"
    cat.put("cpus", lambda: str(len(hwtext.cpulist(_text(sysdir / "online")))))
    if "sockets" not in cat.values:
        cat.update("sockets", lambda: _sysfs_topology(sysdir))
    if "microcode" not in cat.values and "model" in cat.values:
        cat.put("microcode", lambda: _opt(sysdir / "cpu0/microcode/version"))
    cat.put("max_mhz", lambda: None if (v := _opt(sysdir / "cpu0/cpufreq/cpuinfo_max_freq"))
            is None else f"{int(v) / 1000:.0f}")
    nodes = sorted((root / "sys/devices/system/node").glob("node[0-9]*"),
                   key=lambda p: int(p.name[4:]))
    if nodes:
        cat.put("numa_nodes", lambda: str(len(nodes)))
        cat.put("numa_cpus", lambda: " | ".join(_text(n / "cpulist") for n in nodes))
    return cat


def _sysfs_topology(sysdir: Path) -> Values:
    """Sockets, cores, threads per core from ``cpu*/topology`` (where
    ``/proc/cpuinfo`` does not tell them: arm64)."""
    pairs = []
    for top in sysdir.glob("cpu[0-9]*/topology"):
        pairs.append((_text(top / "physical_package_id"), _text(top / "core_id")))
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
    for line in _text(root / "proc/meminfo").splitlines():
        m = re.match(r"(\w+):\s+(\d+)", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


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
            size = int(_text(unit / "size"))
            if size > 0:
                sizes.append(f"{size} MB")
                if (unit / "dimm_mem_type").exists():
                    types.append(_text(unit / "dimm_mem_type"))
        if not units:
            for row in sorted(mc.glob("csrow[0-9]*")):
                if not (row / "size_mb").exists():
                    continue
                sized = True
                size = int(_text(row / "size_mb"))
                if size > 0:
                    sizes.append(f"{size} MB")
                    if (row / "mem_type").exists():
                        types.append(_text(row / "mem_type"))
    out = {"edac_mcs": str(len(mcs))}
    if sized:
        out["edac_dimms"] = str(len(sizes))
    if sizes:
        out["edac_dimm_sizes"] = hwtext.counted(sizes)
    if types:
        out["edac_mem_type"] = hwtext.counted(types)
    return out


def _dmidecode(root: Path, types: str) -> str | None:
    """``dmidecode -t TYPES`` where it can run (root, installed, this node's own
    root), else None."""
    if root != Path("/") or os.geteuid() != 0:
        return None
    exe = shutil.which("dmidecode", path="/usr/sbin:/sbin:/usr/bin:/bin")
    if exe is None:
        return None
    proc = subprocess.run([exe, "-t", types], capture_output=True, text=True, timeout=2,
                          check=False)
    if proc.returncode != 0:
        raise OSError(f"dmidecode exit {proc.returncode}")
    return proc.stdout


def _memory(root: Path) -> _Category:
    cat = _Category()
    info: dict[str, int] = {}
    cat.update("total", lambda: info.update(_meminfo(root)) or {})
    if "MemTotal" in info:
        cat.values["total"] = round_memory(info["MemTotal"])
    else:
        cat.unknown.append("total")
    if "HugePages_Total" in info:
        cat.values["hugepages"] = (f"{info['HugePages_Total']} x "
                                   f"{info.get('Hugepagesize', 0)} kB")
    cat.update("edac", lambda: edac_memory(root))
    cat.update("dimms", lambda: hwtext.parse_dmidecode_memory(_dmidecode(root, "17") or ""))
    return cat


# -- firmware ---------------------------------------------------------------

#: ``/sys/class/dmi/id`` files read (serials, UUIDs and asset tags never are)
DMI_FILES = ("bios_vendor", "bios_version", "bios_date", "bios_release", "sys_vendor",
             "product_name", "product_family", "board_vendor", "board_name",
             "board_version")


def _firmware(root: Path) -> _Category:
    cat = _Category()
    dmi = root / "sys/class/dmi/id"
    if dmi.is_dir():
        for name in DMI_FILES:
            cat.put(name, lambda name=name: _opt(dmi / name))
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


def _kernel(root: Path) -> _Category:
    cat = _Category()
    cat.put("release", lambda: _text(root / "proc/sys/kernel/osrelease"))
    cat.put("version", lambda: _text(root / "proc/sys/kernel/version"))
    cat.put("cmdline", lambda: mask_cmdline(_text(root / "proc/cmdline")))
    cat.put("tainted", lambda: _text(root / "proc/sys/kernel/tainted"))
    modules: list[str] = []

    def loaded() -> str | None:
        text = _opt(root / "proc/modules")  # none: a kernel without modules
        modules.extend(relevant_modules(text) if text is not None else [])
        return None if text is None else " ".join(modules)

    cat.put("modules", loaded)
    for name in modules:
        cat.put(f"module.{name}", lambda name=name: _opt(root / "sys/module" / name / "version"))
    return cat


# -- network ----------------------------------------------------------------

_SIOCETHTOOL = 0x8946
_ETHTOOL_GDRVINFO = 0x00000003


def ethtool_drvinfo(iface: str) -> tuple[str, str, str]:
    """(driver, version, firmware) of ``ethtool -i IFACE``, by its ioctl."""
    buf = array.array("B", struct.pack("I", _ETHTOOL_GDRVINFO) + b"\0" * 192)
    addr, _ = buf.buffer_info()
    ifr = struct.pack("16sP", iface.encode()[:15], addr)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        fcntl.ioctl(sock.fileno(), _SIOCETHTOOL, ifr)
    raw = buf.tobytes()

    def field(i: int) -> str:
        return raw[4 + 32 * i:4 + 32 * (i + 1)].split(b"\0", 1)[0].decode(errors="replace")

    return field(0), field(1), field(2)


def _network(root: Path) -> _Category:
    cat = _Category()
    for dev in sorted((root / "sys/class/net").glob("*")):
        iface = dev.name
        if iface == "lo" or not (dev / "device").exists():
            continue  # virtual (bridges, veths, bonds): what they sit on is read
        pre = f"nic.{iface}"
        cat.put(f"{pre}.driver", lambda dev=dev: os.path.basename(
            os.path.realpath(dev / "device/driver")))
        cat.put(f"{pre}.model", lambda dev=dev: None if not (dev / "device/vendor").exists()
                else f"{_text(dev / 'device/vendor')}:{_text(dev / 'device/device')}")
        cat.put(f"{pre}.mtu", lambda dev=dev: _text(dev / "mtu"))
        cat.put(f"{pre}.state", lambda dev=dev: _text(dev / "operstate"))
        if cat.values.get(f"{pre}.state") == "up":
            cat.put(f"{pre}.speed", lambda dev=dev: _text(dev / "speed"))
        if root == Path("/"):
            cat.put(f"{pre}.firmware", lambda iface=iface: ethtool_drvinfo(iface)[2] or None)
    for hca in sorted((root / "sys/class/infiniband").glob("*")):
        pre = f"ib.{hca.name}"
        for name in ("hca_type", "fw_ver", "board_id"):
            cat.put(f"{pre}.{name}", lambda hca=hca, name=name: _opt(hca / name))
        for port in sorted((hca / "ports").glob("*")):
            for name in ("rate", "state", "phys_state", "link_layer"):
                cat.put(f"{pre}.{port.name}.{name}",
                        lambda port=port, name=name: _opt(port / name))
    return cat


# -- software ---------------------------------------------------------------

def _which(root: Path, name: str, path: str) -> Path | None:
    for d in path.split(":"):
        if d and (root / d.lstrip("/") / name).is_file():
            return root / d.lstrip("/") / name
    return None


def mpi_version(prefix: Path) -> str | None:
    """``"<name> <version>"`` of an MPI installation, from its pkg-config file."""
    for lib in ("lib", "lib64", "lib/x86_64-linux-gnu"):
        for name in ("ompi", "mpich", "impi"):
            pc = prefix / lib / "pkgconfig" / f"{name}.pc"
            if pc.is_file():
                m = re.search(r"^Version:\s*(\S+)", pc.read_text(), re.MULTILINE)
                if m:
                    return f"{name} {m.group(1)}"
    return None


def spack_lock_hash(env_dir: Path) -> str | None:
    """A short hash of the concrete specs of a Spack environment's
    ``spack.lock`` (its DAG hashes), None where it has none."""
    lock = env_dir / "spack.lock"
    if not lock.is_file():
        return None
    specs = json.loads(lock.read_text()).get("concrete_specs", {})
    return hashlib.sha256(" ".join(sorted(specs)).encode()).hexdigest()[:16]


def _software(root: Path, env: Mapping[str, str]) -> _Category:
    cat = _Category()
    launcher = _which(root, "mpiexec", env.get("PATH", ""))
    if launcher is not None:
        real = Path(os.path.realpath(launcher))
        prefix = real.parent.parent
        cat.put("mpi_prefix", lambda: str(prefix.relative_to(root)) if root != Path("/")
                else str(prefix))
        cat.put("mpi", lambda: mpi_version(prefix))
    if env.get("SPACK_ENV"):
        spack_env = root / env["SPACK_ENV"].lstrip("/")
        cat.put("spack_env", lambda: spack_env.name)
        cat.put("spack_lock", lambda: spack_lock_hash(spack_env))
    return cat


# -- mounts -----------------------------------------------------------------

#: file systems that are not storage (the default list leaves them out)
VIRTUAL_FS = frozenset({
    "proc", "sysfs", "tmpfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "securityfs",
    "pstore", "bpf", "debugfs", "tracefs", "mqueue", "hugetlbfs", "configfs", "fusectl",
    "autofs", "binfmt_misc", "efivarfs", "nsfs", "rpc_pipefs", "ramfs", "squashfs",
    "overlay", "fuse.gvfsd-fuse", "fuse.portal", "selinuxfs", "rootfs", "nfsd"})

#: mount points under these are never part of the default list
_SKIPPED = ("/proc", "/sys", "/dev", "/run", "/snap", "/var/lib/docker",
            "/var/lib/containers", "/var/lib/kubelet")


def parse_mounts(text: str) -> dict[str, str]:
    """``{mount point: fstype}`` of ``/proc/mounts`` (octal escapes decoded)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[1])
            out[point] = parts[2]
    return out


def _mounts(root: Path, wanted: Sequence[str] | None) -> _Category:
    cat = _Category()
    table: dict[str, str] = {}
    cat.update("mounts", lambda: table.update(parse_mounts(_text(root / "proc/mounts"))) or {})
    if "mounts" in cat.unknown:
        return cat
    if wanted is None:
        cat.values.update({p: t for p, t in sorted(table.items()) if t not in VIRTUAL_FS
                           and not any(p == s or p.startswith(s + "/") for s in _SKIPPED)})
    else:
        cat.values.update({p: table.get(p, "absent") for p in wanted})
    return cat


def fingerprint(root: Path = Path("/"), mounts: Sequence[str] | None = None,
                env: Mapping[str, str] | None = None,
                ) -> tuple[dict[str, Values], dict[str, list[str]]]:
    """The node's fingerprint and its unreadable keys, by category (see the
    module's doc). ``mounts``: the mount points jobs need (default: every
    mount of a storage file system); ``env``: the environment the checks run
    in (its ``PATH``'s MPI, its ``SPACK_ENV``; default this process's)."""
    env = os.environ if env is None else env
    readers: dict[str, Callable[[], _Category]] = {
        "cpu": lambda: _cpu(root), "memory": lambda: _memory(root),
        "firmware": lambda: _firmware(root), "kernel": lambda: _kernel(root),
        "network": lambda: _network(root), "software": lambda: _software(root, env),
        "mounts": lambda: _mounts(root, mounts)}
    values: dict[str, Values] = {}
    unknown: dict[str, list[str]] = {}
    for name, read in readers.items():
        try:
            cat = read()
        except Exception:  # noqa: BLE001 - the whole category unreadable
            cat = _Category()
            cat.unknown.append("*")
        values[name] = cat.values
        if cat.unknown:
            unknown[name] = cat.unknown
    return values, unknown
