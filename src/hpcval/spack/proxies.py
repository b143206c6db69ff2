"""hpcval's own proxies built by version (``proxies/<name>/VERSION``): a version that
changes only when the files its build uses do (``SHA256SUMS``), checked by
``hpcval spack proxy-version``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hpcval.core.errors import InputError
from hpcval.core.paths import project_root

#: The proxies under ``proxies/`` that Spack builds by version: each has ``VERSION`` and
#: ``SHA256SUMS`` (the sha256 of every file its build uses), and its package
#: ``hpcval-<name>`` declares that one version.
VERSIONED_PROXIES = ("cfdio", "gpubench")


#: The files of a proxy its build uses (patterns in ``proxies/<name>/``): what SHA256SUMS
#: lists and what the package copies into its stage. Not the README nor the scripts.
PROXY_BUILD_FILES = ("Makefile", "*.c", "*.h", "*.cu")


#: A proxy version: numbers and dots (``1.0.0``), what Spack orders as a version.
_PROXY_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*")


def proxy_dir(name: str, root: str | Path | None = None) -> Path:
    """``proxies/<name>`` of the checkout."""
    return Path(root or project_root()) / "proxies" / name


def proxy_build_files(directory: Path) -> list[str]:
    """Names of the files in *directory* its build uses (:data:`PROXY_BUILD_FILES`)."""
    return sorted({p.name for pattern in PROXY_BUILD_FILES for p in directory.glob(pattern)
                   if p.is_file()})


def read_proxy_sums(directory: Path) -> tuple[str, dict[str, str]]:
    """(the version SHA256SUMS was written for, file name -> sha256) of a proxy."""
    written_for = ""
    sums = {}
    for line in (directory / "SHA256SUMS").read_text().splitlines():
        if line.startswith("#"):
            words = line[1:].split()
            if len(words) >= 2 and not written_for:
                written_for = words[1].rstrip(":")
        elif line.strip():
            digest, _, name = line.partition("  ")
            sums[name.strip()] = digest.strip()
    return written_for, sums


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _proxy_state(name: str, root: str | Path | None) -> tuple[str, str, list[str]]:
    """(VERSION, the version SHA256SUMS was written for, files changed since) of a proxy;
    :class:`InputError` where VERSION or SHA256SUMS is missing or VERSION is no version."""
    directory = proxy_dir(name, root)
    where = f"proxies/{name}"
    if not (directory / "VERSION").is_file():
        raise InputError(f"{where}/VERSION: missing: write the proxy's version (e.g. 1.0.0) "
                         "and run `hpcval spack proxy-version --update`")
    version = (directory / "VERSION").read_text().strip()
    if not _PROXY_VERSION.fullmatch(version):
        raise InputError(f"{where}/VERSION: {version!r} is not a version like 1.0.0")
    if not (directory / "SHA256SUMS").is_file():
        raise InputError(f"{where}/SHA256SUMS: missing: run "
                         "`hpcval spack proxy-version --update`")
    written_for, sums = read_proxy_sums(directory)
    files = proxy_build_files(directory)
    changed = sorted(f for f in {*files, *sums}
                     if f not in sums or f not in files or _sha256(directory / f) != sums[f])
    return version, written_for, changed


def proxy_version_problem(name: str, root: str | Path | None = None) -> str | None:
    """What makes ``proxies/<name>/VERSION`` untrue of the sources, in one line, or None:
    a file the build uses changed, appeared or went since the sums were written for that
    version, or the version was bumped and the sums not written again."""
    try:
        version, written_for, changed = _proxy_state(name, root)
    except InputError as err:
        return str(err)
    if written_for != version:
        return (f"proxies/{name}/SHA256SUMS was written for {written_for or 'no version'}, "
                f"VERSION is {version}: run `hpcval spack proxy-version --update`")
    if changed:
        return (f"proxies/{name} changed since VERSION {version} ({', '.join(changed)}): "
                f"bump proxies/{name}/VERSION and run `hpcval spack proxy-version --update`")
    return None


def update_proxy_sums(name: str, root: str | Path | None = None) -> tuple[str, bool]:
    """Write ``proxies/<name>/SHA256SUMS`` for its VERSION; returns (VERSION, whether it
    was written). Refuses (:class:`InputError`) to write new sums under the version the old
    ones were written for: a changed proxy needs a new version first."""
    directory = proxy_dir(name, root)
    if not (directory / "SHA256SUMS").exists() and (directory / "VERSION").is_file():
        (directory / "SHA256SUMS").write_text("")
    version, written_for, changed = _proxy_state(name, root)
    if written_for == version and not changed:
        return version, False
    if written_for == version:
        raise InputError(f"proxies/{name} changed since VERSION {version} "
                         f"({', '.join(changed)}): bump proxies/{name}/VERSION first")
    lines = [f"# hpcval-{name} {version}: sha256 of the files its build uses "
             "(hpcval spack proxy-version)"]
    lines += [f"{_sha256(directory / f)}  {f}" for f in proxy_build_files(directory)]
    (directory / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    return version, True


def lock_proxy_versions(lock: dict[str, Any], root: str | Path | None = None) -> list[str]:
    """One line per versioned proxy a lock holds at another version than its VERSION (the
    lock would install a version its package no longer declares)."""
    wrong = []
    for name in VERSIONED_PROXIES:
        version_file = proxy_dir(name, root) / "VERSION"
        if not version_file.is_file():
            continue
        version = version_file.read_text().strip()
        locked = sorted({str(n.get("version")) for n in lock.get("concrete_specs", {}).values()
                         if n.get("name") == f"hpcval-{name}"} - {version})
        if locked:
            wrong.append(f"hpcval-{name}@{','.join(locked)}, proxies/{name}/VERSION is "
                         f"{version}")
    return wrong
