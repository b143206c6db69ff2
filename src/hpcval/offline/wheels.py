"""hpcval's whole Python stack as wheels for a target platform and Python.

What ``make setup`` installs (pyproject's dependencies and the extras it names), pip and
the build backend an editable install needs (``setuptools>=77``, ``wheel``), and clingo,
Spack's concretizer, are downloaded with ``pip download --only-binary=:all: --platform P
--python-version V``: wheels built for the target, whatever machine makes the bundle. A
requirement PyPI has only as a source distribution is built here when the target is this
machine (same platform and Python); for another target it is named (exit 3).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from hpcval.core.errors import EnvironmentFault, InputError

#: The extras ``make setup`` installs (Makefile: ``pip install -e '.[impi,wrf,dev]'``).
SETUP_EXTRAS = ("impi", "wrf", "dev")
#: What a venv needs beyond hpcval's own requirements: pip, the build backend of
#: ``pip install -e .`` (pyproject's ``[build-system]``) and Spack's concretizer.
CLINGO = "clingo==5.8.3"

_PLATFORM = re.compile(r"(manylinux|musllinux)_(\d+)_(\d+)_(\w+)|manylinux(1|2010|2014)_(\w+)"
                       r"|(macosx_\d+_\d+_\w+|win_amd64|win_arm64|linux_\w+)")
#: the glibc minor version of the legacy manylinux names
_LEGACY = {"1": 5, "2010": 12, "2014": 17}


def requirements(pyproject: Path) -> list[str]:
    """Every requirement ``make setup`` installs, with the build system's and clingo."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise EnvironmentFault("reading pyproject.toml needs Python 3.11 or later (tomllib): "
                               "make the bundle with it") from None
    try:
        with pyproject.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise InputError(f"{pyproject}: cannot read it ({err})") from None
    project = data.get("project", {})
    reqs = list(project.get("dependencies", []))
    for extra in SETUP_EXTRAS:
        reqs += project.get("optional-dependencies", {}).get(extra, [])
    reqs += data.get("build-system", {}).get("requires", [])
    return [*reqs, "pip", CLINGO]


def platforms(platform: str) -> list[str]:
    """The platform tags a target of *platform* installs, newest first, as pip expands
    them (``manylinux_2_28_x86_64`` also takes ``manylinux_2_17``, ``manylinux2014``,
    ...). :class:`InputError` for a name that is no wheel platform tag."""
    found = _PLATFORM.fullmatch(platform)
    if not found:
        raise InputError(f"--platform {platform}: not a wheel platform tag (e.g. "
                         "manylinux_2_28_x86_64, manylinux2014_aarch64)")
    if found.group(7):
        return [platform]
    if found.group(5):
        kind, major, minor, arch = "manylinux", 2, _LEGACY[found.group(5)], found.group(6)
    else:
        kind, major, minor, arch = (found.group(1), int(found.group(2)), int(found.group(3)),
                                    found.group(4))
    tags = [f"{kind}_{major}_{m}_{arch}" for m in range(minor, -1, -1)]
    if kind == "manylinux":
        tags += [f"manylinux{name}_{arch}" for name, m in _LEGACY.items() if m <= minor]
    return tags


def target_tags(platform: str, python_version: str) -> set[str]:
    """Every wheel tag (``py-abi-platform``) an interpreter of *python_version* on
    *platform* installs (:mod:`packaging.tags`)."""
    from packaging import tags

    version = version_tuple(python_version)
    plats = platforms(platform)
    found = {str(t) for t in tags.cpython_tags(version, platforms=plats)}
    found |= {str(t) for t in tags.compatible_tags(version, f"cp{version[0]}{version[1]}",
                                                   plats)}
    return found


def version_tuple(python_version: str) -> tuple[int, int]:
    if not re.fullmatch(r"3\.\d{1,2}", python_version):
        raise InputError(f"--python-version {python_version}: give MAJOR.MINOR, e.g. 3.11")
    major, minor = python_version.split(".")
    return int(major), int(minor)


def foreign_wheels(folder: Path, platform: str, python_version: str) -> list[str]:
    """The wheels of *folder* no interpreter of the target installs (their tags, from
    the file names, are none of the target's): one line each."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    wanted = target_tags(platform, python_version)
    wrong = []
    for wheel in sorted(folder.glob("*.whl")):
        try:
            tags = {str(t) for t in parse_wheel_filename(wheel.name)[3]}
        except InvalidWheelFilename:
            wrong.append(f"{wheel.name}: not a wheel file name")
            continue
        if not tags & wanted:
            wrong.append(f"{wheel.name}: tags {', '.join(sorted(tags))}, none for "
                         f"Python {python_version} on {platform}")
    return wrong


def is_this_machine(platform: str, python_version: str) -> bool:
    """Whether this interpreter is the target (so source distributions built here fit)."""
    from packaging import tags

    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    return python_version == here and any(platform == t.platform for t in tags.sys_tags())


def download(reqs: list[str], dest: Path, platform: str, python_version: str) -> list[str]:
    """``pip download`` every requirement (with its dependencies) as wheels for the target
    into *dest*; returns the wheel file names. A requirement with no wheel for the target:
    built here from its source distribution when the target is this machine, else named
    (:class:`EnvironmentFault`)."""
    dest.mkdir(parents=True, exist_ok=True)
    # every platform tag the target takes, given one by one: pip does not expand a
    # ``manylinux_2_28`` tag to the older ones for every Python (a cp312 manylinux2014
    # wheel was not found for ``--platform manylinux_2_28_x86_64`` alone)
    target = ["--only-binary=:all:", *[f"--platform={p}" for p in platforms(platform)],
              "--python-version", python_version, "--implementation", "cp"]
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
           *target, "--dest", str(dest), *reqs]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lacking = re.findall(r"No matching distribution found for (\S+)", proc.stderr)
        unreachable = re.search(r"(Failed to establish a new connection|Temporary failure in "
                                r"name resolution|Network is unreachable|ProxyError)",
                                proc.stderr)
        if unreachable:
            raise EnvironmentFault(f"pip download: PyPI unreachable ({unreachable.group(1)}): "
                                   "make the bundle on a machine with network")
        if lacking and is_this_machine(platform, python_version):
            built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet",
                                    "--disable-pip-version-check", "--wheel-dir", str(dest),
                                    *reqs], capture_output=True, text=True, check=False)
            if built.returncode == 0:
                return sorted(p.name for p in dest.glob("*.whl"))
            lacking = lacking or ["(see pip wheel)"]
        if lacking:
            raise EnvironmentFault(
                f"pip download: no wheel of {', '.join(lacking)} for Python {python_version} "
                f"on {platform} (only a source distribution, or none): build it on a machine "
                "of that platform and Python and add it to wheels/")
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise EnvironmentFault(f"pip download for {platform}, Python {python_version} failed "
                               f"(exit {proc.returncode}): {last}")
    return sorted(p.name for p in dest.glob("*.whl"))
