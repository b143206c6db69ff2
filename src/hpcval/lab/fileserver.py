"""The lab's file server: one namespace serving a directory over sshfs.

This kernel has no NFS or CIFS client, but it has FUSE, so the shared file
system is ``sshfs`` (SFTP over SSH, Debian packages ``sshfs`` and
``openssh-server``):

* ``sshd`` runs in network namespace ``hpcval-lab-fs`` (node ``lab-fs``,
  address ``.9`` of the lab subnet), listening on that address only, with host
  and client keys generated under the lab's state directory, the client key
  limited to SFTP (``ForceCommand internal-sftp``).
* Every compute node mounts :attr:`LabLayout.export_dir` at
  :attr:`LabLayout.shared_dir` (the same path on every node). The mount is made
  inside the node's ``slurmd`` mount namespace (``nsenter``), so the node's
  jobs see it, and ``sshfs`` runs in the node's network namespace, so its
  traffic leaves through the node's ``lab0`` link, crosses the bridge and enters
  the file server's link: fabric profiles shape it like MPI traffic.

Mount options (:data:`MOUNT_OPTIONS`) are chosen for several writers on several
nodes: ``direct_io`` (no client page cache: a node reads what another node
wrote, and figures measure network and server, not the node's memory),
``dir_cache=no`` and zero FUSE attribute/entry timeouts (a file another node
created or extended is seen at once, as MPI-IO and the re-read of part files
need), ``allow_other`` (jobs of any user on the node).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcval.lab import network
from hpcval.lab.layout import MARKER, LabLayout, LabNode
from hpcval.lab.state import LabState
from hpcval.lab.system import (
    LabError,
    mount_entries,
    pid_alive,
    pid_executable,
    read_pid_file,
    run,
    stop_pid,
)

SSHD = "/usr/sbin/sshd"
#: sshd's privilege-separation directory; Debian's init scripts create it, the lab
#: creates it when missing and removes it again.
PRIVSEP_DIR = Path("/run/sshd")
#: Cipher with AES-NI on x86: the cheapest authenticated cipher per byte on the
#: 2 cores that run client, server and the benchmark at once.
CIPHER = "aes128-gcm@openssh.com"
MOUNT_OPTIONS = ("allow_other,direct_io,dir_cache=no,attr_timeout=0,entry_timeout=0,"
                 "negative_timeout=0")
PROGRAMS = {"sshfs": "sshfs", "sshd": "openssh-server", "ssh-keygen": "openssh-client",
            "ssh": "openssh-client", "nsenter": "util-linux", "umount": "mount"}


def missing_reason() -> str | None:
    """Why the file server cannot run here (with the package to install), or None."""
    missing = [p for p in PROGRAMS if shutil.which(p) is None and not Path("/usr/sbin", p).exists()]
    if missing:
        pkgs = sorted({PROGRAMS[p] for p in missing})
        return (f"missing programs {', '.join(missing)} "
                f"(install with: apt-get install {' '.join(pkgs)})")
    if not Path("/dev/fuse").exists():
        return "/dev/fuse is missing (the kernel has no FUSE)"
    return None


def _keygen(path: Path, comment: str) -> str:
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    return path.with_suffix(".pub").read_text().strip()


def sshd_config(layout: LabLayout) -> str:
    d = layout.fs_dir
    return f"""{MARKER}: file server of the lab (hpcval lab up)
ListenAddress {layout.file_server.address}
Port 22
HostKey {d / 'ssh_host_ed25519_key'}
PidFile {d / 'sshd.pid'}
AuthorizedKeysFile {d / 'authorized_keys'}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
Ciphers {CIPHER},aes256-gcm@openssh.com,chacha20-poly1305@openssh.com
Subsystem sftp internal-sftp
ForceCommand internal-sftp
"""


def ssh_options(layout: LabLayout) -> list[str]:
    """ssh options of the clients (given to sshfs as ``-o``)."""
    d = layout.fs_dir
    return [f"IdentityFile={d / 'id_ed25519'}", f"UserKnownHostsFile={d / 'known_hosts'}",
            "GlobalKnownHostsFile=/dev/null", "StrictHostKeyChecking=yes", "BatchMode=yes",
            "IdentitiesOnly=yes", f"Ciphers={CIPHER}", "Compression=no",
            "ServerAliveInterval=15"]


def start(layout: LabLayout, state: LabState, log=print) -> None:
    """Create the file server's namespace and link, start sshd, mount on every node.

    Needs the compute nodes' ``slurmd`` running (their mount namespaces are
    where the jobs run). Every step is recorded in ``state`` as it happens.
    """
    fs = layout.file_server
    log(f"lab: file server {fs.name} netns {fs.netns} {fs.address}, sshfs at "
        f"{layout.shared_dir}")
    info = state.fileserver
    info.update({"address": fs.address, "export": str(layout.export_dir),
                 "mount": str(layout.shared_dir), "mounts": {}})
    state.save(layout.state_file)
    network.create_node(layout, fs, state)
    line = f"{fs.address} {fs.name} {MARKER}"
    state.added_lines.setdefault(str(network.HOSTS), []).append(line)
    state.save(layout.state_file)
    text = network.HOSTS.read_text() if network.HOSTS.exists() else ""
    network.HOSTS.write_text(text + ("" if not text or text.endswith("\n") else "\n")
                             + line + "\n")

    d = layout.fs_dir
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    layout.export_dir.mkdir(exist_ok=True)
    os.chmod(layout.export_dir, 0o1777)
    layout.shared_dir.mkdir(exist_ok=True)
    host_pub = _keygen(d / "ssh_host_ed25519_key", f"{fs.name} host key")
    client_pub = _keygen(d / "id_ed25519", "hpcval lab nodes")
    (d / "authorized_keys").write_text(f"restrict {client_pub}\n")
    os.chmod(d / "authorized_keys", 0o600)
    (d / "known_hosts").write_text(f"{fs.address} {host_pub.rsplit(' ', 1)[0]}\n")
    (d / "sshd_config").write_text(sshd_config(layout))

    if not PRIVSEP_DIR.exists():
        PRIVSEP_DIR.mkdir(mode=0o755)
        info["privsep_dir"] = str(PRIVSEP_DIR)
        state.save(layout.state_file)
    run([SSHD, "-t", "-f", str(d / "sshd_config")])
    run([SSHD, "-f", str(d / "sshd_config"), "-E", str(layout.log_dir / "sshd.log")],
        netns=fs.netns)
    info["sshd"] = read_pid_file(d / "sshd.pid")
    state.save(layout.state_file)

    for node in layout.nodes:
        ns_pid = int(state.daemons[f"slurmd-{node.name}"]["pid"])
        info["mounts"][node.name] = {"pid": mount(layout, node, ns_pid), "ns_pid": ns_pid}
        state.save(layout.state_file)


def mount(layout: LabLayout, node: LabNode, ns_pid: int, timeout: float = 20.0) -> int:
    """Mount the export on ``node`` inside the mount namespace of ``ns_pid`` (its
    slurmd); returns the PID of the sshfs process serving the mount."""
    logf = layout.log_dir / f"sshfs-{node.name}.log"
    cmd = ["nsenter", "-t", str(ns_pid), "-m", "-n", "sshfs", "-f",
           f"{layout.file_server.address}:{layout.export_dir}", str(layout.shared_dir),
           "-F", "/dev/null", "-o", MOUNT_OPTIONS]
    for opt in ssh_options(layout):
        cmd += ["-o", opt]
    with open(logf, "ab") as out:
        # nsenter execs sshfs, so this PID is sshfs's; -f keeps it in the foreground
        # (no daemon fork), its own session keeps it off our terminal's signals
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_mounted(ns_pid, layout.shared_dir):
            return proc.pid
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    tail = logf.read_text(errors="replace").strip().splitlines()[-5:]
    raise LabError(f"sshfs mount on {node.name} failed; {logf}:\n" + "\n".join(tail))


def fuse_mounts(pid: int | str, path: Path) -> list[str]:
    """FUSE mounts at ``path`` (or below it) seen by process ``pid``."""
    try:
        text = Path(f"/proc/{pid}/mountinfo").read_text()
    except OSError:
        return []
    return parse_fuse_mounts(text, path)


def parse_fuse_mounts(text: str, path: Path) -> list[str]:
    """Mount points of FUSE file systems at or below ``path`` in ``mountinfo`` text."""
    prefix = str(path).rstrip("/")
    return [target for target, fstype, _opts in mount_entries(text)
            if fstype.startswith("fuse")
            and (target == prefix or target.startswith(prefix + "/"))]


def is_mounted(pid: int, path: Path) -> bool:
    return str(path) in fuse_mounts(pid, path)


def _mount_ns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def lab_fuse_mounts(state_dir: Path) -> dict[str, tuple[int, list[str]]]:
    """Every FUSE mount under ``state_dir`` in any mount namespace of this machine:
    namespace -> (a PID inside it, mount points)."""
    found: dict[str, tuple[int, list[str]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        ns = _mount_ns(entry.name)
        if ns is None or ns in found:
            continue
        targets = fuse_mounts(entry.name, state_dir)
        if targets:
            found[ns] = (int(entry.name), targets)
    return found


def unmount_all(state_dir: Path) -> list[str]:
    """Detach every FUSE mount under ``state_dir`` wherever it is mounted.

    ``umount -l`` (lazy) works on a live mount and on a dead one whose sshfs
    is gone ("Transport endpoint is not connected"), and cannot hang on it.
    """
    removed = []
    for _ns, (pid, targets) in lab_fuse_mounts(state_dir).items():
        for target in sorted(targets, key=len, reverse=True):
            proc = subprocess.run(["nsenter", "-t", str(pid), "-m", "umount", "-l", target],
                                  capture_output=True, text=True, timeout=30, check=False)
            if proc.returncode == 0:
                removed.append(f"{target} (pid {pid})")
    return removed


@dataclass
class FileServerDown:
    unmounted: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)


def stop(state: LabState, state_dir: Path) -> FileServerDown:
    """Unmount on every node, stop the sshfs clients and sshd. Idempotent, and
    works without a state file (mounts are found in /proc, sshd by its PID file)."""
    report = FileServerDown(unmounted=unmount_all(state_dir))
    info = state.fileserver
    for name, mnt in sorted(dict(info.get("mounts", {})).items()):
        pid = int(mnt["pid"])
        if stop_pid(pid, "sshfs", timeout=5):
            report.stopped.append(f"sshfs-{name} (pid {pid})")
    sshd_pid: int | None = int(info["sshd"]) if info.get("sshd") else None
    if sshd_pid is None:
        try:
            sshd_pid = int((state_dir / "fileserver" / "sshd.pid").read_text().strip())
        except (OSError, ValueError):
            sshd_pid = None
    if sshd_pid is not None and stop_pid(sshd_pid, "sshd"):
        report.stopped.append(f"sshd-lab-fs (pid {sshd_pid})")
    privsep = info.get("privsep_dir")
    if privsep and Path(privsep).is_dir() and not any(Path(privsep).iterdir()):
        Path(privsep).rmdir()
    return report


@dataclass
class FileServerStatus:
    address: str = ""
    export: str = ""
    mount: str = ""
    sshd: str = ""
    #: node -> "mounted", "NOT MOUNTED", "NOT CONNECTED ..." (sshfs gone)
    mounts: dict[str, str] = field(default_factory=dict)
    qdisc: str = ""
    rx_bytes: int = 0
    tx_bytes: int = 0
    problems: list[str] = field(default_factory=list)


def status(state: LabState) -> FileServerStatus | None:
    info = state.fileserver
    if not info:
        return None
    st = FileServerStatus(address=str(info.get("address", "")), export=str(info.get("export")),
                          mount=str(info.get("mount", "")))
    pid = info.get("sshd")
    running = bool(pid) and pid_alive(int(pid)) and pid_executable(int(pid)) == "sshd"
    st.sshd = f"pid {pid} {'running' if running else 'NOT RUNNING'}"
    if not running:
        st.problems.append("file server sshd is not running")
    for name, mnt in sorted(dict(info.get("mounts", {})).items()):
        ns_pid, sshfs_pid = int(mnt["ns_pid"]), int(mnt["pid"])
        if not is_mounted(ns_pid, Path(st.mount)):
            st.mounts[name] = "NOT MOUNTED"
        else:
            probe = subprocess.run(["nsenter", "-t", str(ns_pid), "-m", "stat", "-f", "-c",
                                    "%T", st.mount], capture_output=True, text=True,
                                   timeout=15, check=False)
            alive = pid_alive(sshfs_pid) and pid_executable(sshfs_pid) == "sshfs"
            st.mounts[name] = (f"mounted (sshfs pid {sshfs_pid})"
                               if probe.returncode == 0 and alive else
                               "NOT CONNECTED: " + (probe.stderr.strip() or "sshfs is gone"))
        if not st.mounts[name].startswith("mounted"):
            st.problems.append(f"{name}: {st.mount} {st.mounts[name]}")
    return st
