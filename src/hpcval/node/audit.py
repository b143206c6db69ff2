"""Host tuning audit: the settings M. Jayadevan and D. Wetherall recommend for
tightly coupled MPI in "Getting higher MPI performance for HPC applications on
Google Cloud".

Every setting is read without root from ``/proc``, ``/sys``, ``/etc`` and the
process limits, and compared with the site's expectations
(``site-configs/<site>/host-expectations.yaml``)::

    smt_control: "off"               # an exact value (strings compare as text)
    net.core.busy_read: {min: 50}    # a number at least / at most
    transparent_hugepage: {one_of: [madvise, never]}
    tuned_profile: any               # informational: shown, never judged

Rules: a setting that cannot be read is ``unknown`` and fails unless its
expectation is ``any``, so nothing passes silently; a setting with no
expectation is shown as information. ``python -m hpcval.node.audit --expect FILE``
prints the audit as JSON (used by the ReFrame check) or as a table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpcval.core.errors import ParseError, SiteError
from hpcval.node import expectations
from hpcval.node.expectations import describe, matches
from hpcval.node.gpu_audit import SETTINGS as GPU_SETTINGS  # gpu.* keys: the GPU audit's

Reader = Callable[[Path], "str | None"]


def _read(root: Path, rel: str) -> str | None:
    try:
        return (root / rel).read_text().strip()
    except OSError:
        return None


def _sysctl(name: str) -> Reader:
    rel = "proc/sys/" + name.replace(".", "/")
    return lambda root: (lambda v: " ".join(v.split()) if v is not None else None)(
        _read(root, rel))


def _bracketed(rel: str) -> Reader:
    """``always [madvise] never`` → ``madvise``."""

    def read(root: Path) -> str | None:
        value = _read(root, rel)
        if value is None:
            return None
        for word in value.split():
            if word.startswith("[") and word.endswith("]"):
                return word[1:-1]
        return value

    return read


def _tuned_profile(root: Path) -> str | None:
    value = _read(root, "etc/tuned/active_profile")
    if value is not None:
        return value
    # no tuned installed is a fact, not an unreadable setting
    return "none (tuned not installed)" if not (root / "etc/tuned").exists() else None


def _vulnerabilities(root: Path) -> str | None:
    base = root / "sys/devices/system/cpu/vulnerabilities"
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return None
    exposed = []
    for entry in entries:
        try:
            state = entry.read_text().strip()
        except OSError:
            return None
        if state.startswith("Vulnerable"):
            exposed.append(entry.name)
    return "mitigated" if not exposed else "vulnerable: " + ",".join(exposed)


def _mitigations_cmdline(root: Path) -> str | None:
    cmdline = _read(root, "proc/cmdline")
    if cmdline is None:
        return None
    for word in cmdline.split():
        if word.startswith("mitigations="):
            return word.split("=", 1)[1]
    return "auto"


def _selinux(root: Path) -> str | None:
    if not (root / "sys/fs/selinux").exists():
        return "disabled"
    enforce = _read(root, "sys/fs/selinux/enforce")
    return None if enforce is None else ("enforcing" if enforce == "1" else "permissive")


def _iptables(root: Path) -> str | None:
    tables = _read(root, "proc/net/ip_tables_names")
    if tables is None:
        return None
    return ",".join(sorted(tables.split())) or "none"


def _limit(which: int) -> Reader:
    def read(_root: Path) -> str | None:
        soft, _hard = resource.getrlimit(which)
        return "unlimited" if soft == resource.RLIM_INFINITY else str(soft)

    return read


def _interfaces(root: Path) -> list[Path]:
    try:
        return sorted(p for p in (root / "sys/class/net").iterdir()
                      if (p / "device").exists())
    except OSError:
        return []


def _nic_driver(root: Path) -> str | None:
    drivers = []
    for iface in _interfaces(root):
        try:
            drivers.append(f"{iface.name}:{os.path.basename(os.readlink(iface / 'device/driver'))}")
        except OSError:
            return None
    return ",".join(drivers) if drivers else None


def _nic_coalescing(root: Path) -> str | None:
    """``rx-usecs`` of each physical interface, from ``ethtool -c`` (only on
    the live system: a fixture root has no devices to ask)."""
    ethtool = shutil.which("ethtool")
    if ethtool is None or root != Path("/"):
        return None
    values = []
    for iface in _interfaces(root):
        try:
            out = subprocess.run([ethtool, "-c", iface.name], capture_output=True, text=True,
                                 timeout=5, check=True).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        usecs = [ln.split(":", 1)[1].strip() for ln in out.splitlines()
                 if ln.startswith("rx-usecs:")]
        if not usecs:
            return None
        values.append(f"{iface.name}:{usecs[0]}")
    return ",".join(values) if values else None


#: Every audited setting: name → how to read it below a root directory.
SETTINGS: dict[str, Reader] = {
    "smt_control": lambda root: _read(root, "sys/devices/system/cpu/smt/control"),
    "tuned_profile": _tuned_profile,
    "net.core.busy_read": _sysctl("net.core.busy_read"),
    "net.core.busy_poll": _sysctl("net.core.busy_poll"),
    "net.ipv4.tcp_rmem": _sysctl("net.ipv4.tcp_rmem"),
    "net.ipv4.tcp_wmem": _sysctl("net.ipv4.tcp_wmem"),
    "net.ipv4.tcp_mem": _sysctl("net.ipv4.tcp_mem"),
    "transparent_hugepage": _bracketed("sys/kernel/mm/transparent_hugepage/enabled"),
    "kernel.numa_balancing": _sysctl("kernel.numa_balancing"),
    "cpu_vulnerabilities": _vulnerabilities,
    "mitigations": _mitigations_cmdline,
    "selinux": _selinux,
    "iptables_tables": _iptables,
    "rlimit_memlock": _limit(resource.RLIMIT_MEMLOCK),
    "rlimit_nofile": _limit(resource.RLIMIT_NOFILE),
    "nic_driver": _nic_driver,
    "nic_rx_usecs": _nic_coalescing,
}


@dataclass(frozen=True)
class Finding:
    """One setting: what was found, what the site expects, the verdict
    (``ok``, ``mismatch``, ``unknown`` or ``info``)."""

    setting: str
    found: str | None
    expected: str
    status: str

    def line(self) -> str:
        found = "unknown (unreadable)" if self.found is None else repr(self.found)
        return f"{self.setting}: found {found}, expected {self.expected}"


def load_expectations(path: str | Path) -> dict[str, Any]:
    """Read and check a site's host expectations: the host settings and the GPU
    audit's ``gpu.*`` ones."""
    return expectations.load(path, {"host": SETTINGS, "GPU": GPU_SETTINGS})


def audit(expectations: dict[str, Any], root: str | Path = "/") -> list[Finding]:
    """Read every setting below ``root`` and judge it."""
    root = Path(root)
    findings = []
    for name, reader in SETTINGS.items():
        found = reader(root)
        if name not in expectations:
            findings.append(Finding(name, found, "(no expectation)", "info"))
            continue
        expect = expectations[name]
        if expect == "any":
            status = "info"
        elif found is None:
            status = "unknown"
        else:
            status = "ok" if matches(found, expect) else "mismatch"
        findings.append(Finding(name, found, describe(expect), status))
    return findings


def failures(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status in ("mismatch", "unknown")]


MARKER = "HPCVAL-AUDIT "


def parse_audit_output(text: str, source: str = "audit output") -> list[Finding]:
    """The findings an ``--json`` audit printed."""
    for line in text.splitlines():
        if line.startswith(MARKER):
            try:
                return [Finding(**f) for f in json.loads(line[len(MARKER):])]
            except (ValueError, TypeError) as err:
                raise ParseError(f"{source}: malformed audit line: {err}") from None
    raise ParseError(f"{source}: no '{MARKER.strip()}' line: the audit did not run "
                     "(see the job's standard error)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpcval.node.audit",
                                     description="Audit host settings for MPI workloads.")
    parser.add_argument("--expect", required=True, help="host expectations YAML")
    parser.add_argument("--root", default="/", help="read settings below this directory")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    try:
        findings = audit(load_expectations(args.expect), args.root)
    except SiteError as err:
        print(f"hpcval audit: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(MARKER + json.dumps([asdict(f) for f in findings]))
    else:
        for f in findings:
            print(f"{f.status:9} {f.line()}")
    return 1 if failures(findings) else 0


if __name__ == "__main__":
    sys.exit(main())
