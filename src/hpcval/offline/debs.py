"""The Debian packages ``make system-deps`` installs, with their dependency closure, as
``.deb`` files a machine without network installs from (``make system-deps BUNDLE=DIR``).

The closure is what apt would install on a bare system of the release: ``apt-get
--print-uris install`` with an empty dpkg status (``Dir::State::Status=/dev/null``) and no
recommends, resolved against this machine's apt sources. The release is therefore this
machine's (``/etc/os-release``'s ``VERSION_CODENAME``): the bundle refuses a ``--release``
that is not this machine's (make it on, or in a container of, the target's release). The
files are fetched with ``apt-get download`` at the resolved versions, and a ``Packages``
index is written beside them so that apt reads the folder as a repository.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from hpcval.core.errors import EnvironmentFault, InputError

#: Wheel platform machine -> Debian architecture.
DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64el", "s390x": "s390x"}


def system_packages(makefile: Path) -> list[str]:
    """The Makefile's ``SYSTEM_PACKAGES`` (the one list ``make system-deps`` installs)."""
    try:
        text = makefile.read_text()
    except OSError as err:
        raise InputError(f"{makefile}: cannot read it ({err})") from None
    found = re.search(r"^SYSTEM_PACKAGES\s*:=\s*((?:.*\\\n)*.*)$", text, re.M)
    if not found:
        raise InputError(f"{makefile}: no SYSTEM_PACKAGES := list")
    return found.group(1).replace("\\\n", " ").split()


def host_release() -> str:
    """This machine's release codename (``/etc/os-release``), "" when not said."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return ""
    found = re.search(r"^VERSION_CODENAME=\"?([\w-]+)", text, re.M)
    return found.group(1) if found else ""


def deb_arch(platform: str) -> str:
    """The Debian architecture of a wheel platform tag (its last ``_`` part)."""
    for machine, arch in DEB_ARCH.items():
        if platform.endswith("_" + machine):
            return arch
    return ""


def closure(packages: list[str], arch: str) -> list[tuple[str, str, str]]:
    """(package, version, file name) of every package a bare system of this machine's
    release installs for *packages* (no recommends)."""
    qualified = [p if arch == _host_arch() else f"{p}:{arch}" for p in packages]
    proc = subprocess.run(
        ["apt-get", "-qq", "--print-uris", "-o", "Dir::State::Status=/dev/null",
         "-o", "APT::Install-Recommends=false", "-o", f"APT::Architecture={arch}",
         "install", *qualified], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvironmentFault(f"apt-get cannot resolve the system packages for {arch}: {last} "
                               "(run `apt-get update`; for another architecture "
                               f"`dpkg --add-architecture {arch}` first)")
    found = []
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1].endswith(".deb"):
            name, version = fields[1].split("_")[:2]
            found.append((name, version.replace("%3a", ":"), fields[1]))
    return found


def _host_arch() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                          check=False).stdout.strip()


def download(wanted: list[tuple[str, str, str]], dest: Path, arch: str) -> list[str]:
    """``apt-get download`` every (package, version) not already in *dest*; returns the
    file names. A version apt cannot fetch is named (:class:`EnvironmentFault`)."""
    dest.mkdir(parents=True, exist_ok=True)
    todo = [f"{n}:{arch}={v}" for n, v, f in wanted if not (dest / f).is_file()]
    if todo:
        proc = subprocess.run(["apt-get", "-qq", "download", *todo], cwd=dest,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise EnvironmentFault(f"apt-get download of {len(todo)} packages failed: {last}")
    missing = [f for _, _, f in wanted if not (dest / f).is_file()]
    if missing:
        raise EnvironmentFault(f"apt-get download left out {len(missing)} packages (e.g. "
                               f"{missing[0]})")
    return sorted(f for _, _, f in wanted)  # an epoch's colon is %3a in both


def write_index(folder: Path) -> Path:
    """A ``Packages`` index of the ``.deb`` files in *folder* (each package's control
    fields, its file name, size and sha256), so that apt reads the folder as a flat
    repository (``deb [trusted=yes] file:<folder> ./``)."""
    stanzas = []
    for deb in sorted(folder.glob("*.deb")):
        control = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True,
                                 check=False)
        if control.returncode != 0:
            raise EnvironmentFault(f"{deb}: not a Debian package ({control.stderr.strip()})")
        data = deb.read_bytes()
        stanzas.append(control.stdout.rstrip("\n") + f"\nFilename: ./{deb.name}\n"
                       f"Size: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n")
    index = folder / "Packages"
    index.write_text("\n".join(stanzas))
    return index
