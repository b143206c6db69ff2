"""Finding Spack and reading what it built: what site configs need when ReFrame loads them.

hpcval never imitates Spack: these helpers run the real ``spack`` command (found
on ``PATH`` or under ``$SPACK_ROOT``) and read the concrete spec Spack stores in
each install prefix (``<prefix>/.spack/spec.json``). Import-light: the standard
library and :mod:`hpcval.core.paths` only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

#: Why Spack-backed tests and environments are absent on a machine without Spack.
NOT_FOUND = "spack not found: set SPACK_ROOT or put spack on PATH"


def find_spack() -> Path | None:
    """The ``spack`` executable: ``$SPACK_ROOT/bin/spack`` first, then ``PATH``."""
    root = os.environ.get("SPACK_ROOT")
    if root and (Path(root) / "bin" / "spack").is_file():
        return Path(root) / "bin" / "spack"
    found = shutil.which("spack")
    return Path(found) if found else None


def run_spack(args: list[str], env_dir: str | Path | None = None,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``spack [-e env_dir] args`` and return the completed process.

    Raises :class:`FileNotFoundError` when Spack is not installed.
    """
    spack = find_spack()
    if spack is None:
        raise FileNotFoundError(NOT_FOUND)
    cmd = [str(spack)] + (["-e", str(env_dir)] if env_dir else []) + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def install_prefix(env_dir: str | Path, spec: str) -> Path | None:
    """Install prefix of the installed root of ``env_dir`` matching ``spec``
    (e.g. ``intel-mpi-benchmarks ^openmpi``), or ``None`` if it is not installed."""
    try:
        proc = run_spack(["location", "-i", *spec.split()], env_dir, timeout=120)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return None
    prefix = Path(lines[-1].strip())
    return prefix if (prefix / ".spack" / "spec.json").is_file() else None


def read_spec_json(prefix: str | Path) -> list[dict[str, Any]]:
    """Nodes of the concrete spec Spack stored in an install prefix."""
    data = json.loads((Path(prefix) / ".spack" / "spec.json").read_text())
    return list(data["spec"]["nodes"])


def _node_string(node: dict[str, Any]) -> str:
    params = node.get("parameters", {})
    variants = []
    valued = []
    for key, value in sorted(params.items()):
        if key in ("build_system", "patches", "cflags", "cxxflags", "fflags", "cppflags",
                   "ldflags", "ldlibs") or key.startswith("_"):
            continue
        if isinstance(value, bool):
            variants.append(("+" if value else "~") + key)
        elif isinstance(value, list):
            valued.append(f" {key}={','.join(str(v) for v in value)}")
        else:
            valued.append(f" {key}={value}")
    return f"{node['name']}@{node['version']}{''.join(variants + valued)}"


def describe_spec(nodes: list[dict[str, Any]], dependency: str | None = None) -> str:
    """A one-line concrete spec: the root (name@version, variants, compiler)
    and, if given, one dependency (e.g. the MPI), as ``root %compiler ^dep``."""
    root = nodes[0]
    by_hash = {n.get("hash"): n for n in nodes}
    compilers = []
    deps = []
    for edge in root.get("dependencies", []):
        node = by_hash.get(edge.get("hash"))
        if node is None:
            continue
        virtuals = edge.get("parameters", {}).get("virtuals", [])
        if any(v in ("c", "cxx", "fortran") for v in virtuals):
            entry = f"{node['name']}@{node['version']}"
            if entry not in compilers:
                compilers.append(entry)
        if dependency and (node["name"] == dependency or dependency in virtuals):
            deps.append(_node_string(node))
    text = _node_string(root)
    if compilers:
        text += " %" + ",".join(compilers)
    for dep in deps:
        text += f" ^{dep}"
    return text


#: Packages whose programs hpcval's checks run, each built against one MPI stack, and
#: the feature a programming environment offering it gets (checks select on these,
#: e.g. ``valid_prog_environs = ["+mpi +imb"]``).
BENCHMARK_PACKAGES = {"intel-mpi-benchmarks": "imb", "osu-micro-benchmarks": "omb",
                      "ior": "ior", "hpcval-cfdio": "cfdio", "stream": "stream", "hpcg": "hpcg"}


def installed_prefixes(env_dir: str | Path, names: tuple[str, ...] = tuple(BENCHMARK_PACKAGES),
                       ) -> list[tuple[str, Path]]:
    """(package name, install prefix) of every installed spec of the Spack
    environment named in *names*: one ``spack find`` call. Empty when Spack is
    missing or the environment has nothing installed."""
    try:
        proc = run_spack(["find", "--format", "{name} {prefix}", *names], env_dir, timeout=120)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in proc.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) != 2 or parts[0] not in names:
            continue
        prefix = Path(parts[1].strip())
        if (prefix / ".spack" / "spec.json").is_file():
            found.append((parts[0], prefix))
    return found


def mpi_node(nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The node providing ``mpi`` to the root of a concrete spec."""
    by_hash = {n.get("hash"): n for n in nodes}
    for edge in nodes[0].get("dependencies", []):
        if "mpi" in edge.get("parameters", {}).get("virtuals", []):
            return by_hash.get(edge.get("hash"))
    return None
