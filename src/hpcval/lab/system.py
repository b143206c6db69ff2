"""Running system commands and handling the processes the lab starts."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from hpcval.core.errors import HpcvalError


class LabError(HpcvalError):
    """The lab could not be brought up, changed or taken down."""


def mount_entries(mountinfo: str) -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of each line of a
    ``/proc/<pid>/mountinfo`` text; lines that are not of its shape are left out."""
    out = []
    for line in mountinfo.splitlines():
        pre, sep, post = line.partition(" - ")
        fields, tail = pre.split(), post.split()
        if sep and len(fields) >= 5 and tail:
            out.append((fields[4], tail[0], tail[2] if len(tail) >= 3 else ""))
    return out


def require_root(action: str) -> None:
    """Raise a clear error unless running as root."""
    if os.geteuid() != 0:
        raise LabError(
            f"'hpcval lab {action}' needs root (it creates network namespaces, a bridge "
            "and starts munged/slurmctld/slurmd); run it with sudo or as root"
        )


def require_programs(*names: str) -> None:
    """Raise if a program the lab needs is not installed, naming the Debian package."""
    packages = {
        "slurmctld": "slurm-wlm",
        "slurmd": "slurm-wlm",
        "sinfo": "slurm-client",
        "munged": "munge",
        "ip": "iproute2",
        "tc": "iproute2",
        "unshare": "util-linux",
    }
    missing = [n for n in names if shutil.which(n) is None and not Path("/usr/sbin", n).exists()]
    if missing:
        pkgs = sorted({packages.get(n, n) for n in missing})
        raise LabError(
            f"missing programs: {', '.join(missing)} "
            f"(install with: apt-get install {' '.join(pkgs)})"
        )


def run(
    cmd: Sequence[str], *, check: bool = True, netns: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` (inside network namespace ``netns`` if given), capturing output."""
    full = ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)
    proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise LabError(
            f"command failed ({proc.returncode}): {' '.join(full)}\n{proc.stderr.strip()}"
        )
    return proc


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still answers kill(0); it is not running any more
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def pid_executable(pid: int) -> str | None:
    """Command name of ``pid`` (``/proc/PID/comm``) or None if it is gone.

    The command name, not the executable's path: Debian installs the daemons as
    ``slurmd-wlm`` etc. behind ``slurmd`` alternatives links.
    """
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def read_pid_file(path: Path, timeout: float = 15.0) -> int:
    """Wait for a daemon's PID file to appear and return the PID in it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = path.read_text().strip()
            if text:
                return int(text)
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise LabError(f"{path}: PID file did not appear within {timeout:.0f} s")


def stop_pid(pid: int, expected_exe: str, timeout: float = 10.0) -> bool:
    """Stop process ``pid`` if it still runs ``expected_exe``: SIGTERM, then SIGKILL.

    The executable is checked first so that a recycled PID is never signalled.
    Returns True if a process was stopped.
    """
    if not pid_alive(pid) or pid_executable(pid) != expected_exe:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    if pid_alive(pid) and pid_executable(pid) == expected_exe:
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    return True
