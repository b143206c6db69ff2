"""Finding Spack and reading what it built, for site configs and tests.

hpcval never imitates Spack: these helpers run the real ``spack`` command (found
on ``PATH`` or under ``$SPACK_ROOT``) and read the concrete spec Spack stores in
each install prefix (``<prefix>/.spack/spec.json``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from hpcval.errors import HpcvalError
from hpcval.paths import project_root

#: Why Spack-backed tests and environments are absent on a machine without Spack.
NOT_FOUND = "spack not found: set SPACK_ROOT or put spack on PATH"


def find_spack() -> Path | None:
    """The ``spack`` executable: ``$SPACK_ROOT/bin/spack`` first, then ``PATH``."""
    root = os.environ.get("SPACK_ROOT")
    if root and (Path(root) / "bin" / "spack").is_file():
        return Path(root) / "bin" / "spack"
    found = shutil.which("spack")
    return Path(found) if found else None


def environment_dir(system: str) -> Path:
    """``environments/<system>`` of this project."""
    return project_root() / "environments" / system


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


#: Generated next to an environment's spack.yaml by ``hpcval spack externals`` (run by
#: ``make setup``) and git-ignored: the Intel MPI of the PyPI wheels as an external, at this
#: checkout's venv, whose absolute path no tracked file may hold.
VENV_MPI_INCLUDE = "intel-mpi-venv.yaml"


def venv_intel_mpi(prefix: str | Path) -> str:
    """The version of the Intel MPI wheels installed in the venv at *prefix*
    (``impi-rt`` distribution metadata), e.g. ``2021.18.1``."""
    from importlib import metadata

    site = list(Path(prefix).glob("lib/python3*/site-packages"))
    for dist in metadata.distributions(path=[str(p) for p in site]):
        if (dist.metadata["Name"] or "").lower() == "impi-rt":
            return str(dist.version)
    raise HpcvalError(f"{prefix}: no impi-rt wheel installed in this venv "
                      "(pip install impi-rt impi-devel, or make setup)")


#: Where ``hpcval spack externals`` lays the venv's Intel MPI out as a oneAPI install.
ONEAPI_TREE = Path("share") / "hpcval" / "oneapi"


def oneapi_tree(prefix: str | Path, version: str) -> Path:
    """Lay the venv's Intel MPI out as Spack's ``intel-oneapi-mpi`` expects of a
    prefix (``<root>/mpi/<major.minor>/{bin,include,lib,lib/release}``), with
    symlinks into the venv's flat ``bin/``, ``include/`` and ``lib/``; returns
    ``<root>``, the external's prefix. Idempotent."""
    prefix = Path(prefix)
    root = prefix / ONEAPI_TREE
    component = root / "mpi" / ".".join(version.split(".")[:2])
    component.mkdir(parents=True, exist_ok=True)
    for name in ("bin", "include", "etc", "opt"):
        link = component / name
        if (prefix / name).exists() and not link.is_symlink():
            link.symlink_to(prefix / name, target_is_directory=True)
    lib = component / "lib"
    lib.mkdir(exist_ok=True)
    for entry in (prefix / "lib").iterdir():
        if not entry.name.startswith("python"):
            link = lib / entry.name
            if not link.is_symlink():
                link.symlink_to(entry)
    if not (lib / "release").is_symlink():
        (lib / "release").symlink_to(".", target_is_directory=True)
    return root


def venv_externals_yaml(prefix: str | Path, version: str) -> str:
    """``packages:`` config declaring the venv's Intel MPI as a non-buildable external."""
    return (
        f"# Generated by `hpcval spack externals`; do not edit, do not commit.\n"
        f"# The Intel MPI {version} PyPI wheels (impi-rt, impi-devel) of a venv, through the\n"
        f"# oneAPI directory layout Spack expects (symlinks into its bin/, include/, lib/).\n"
        f"# ~envmods: the wheels ship no env/vars.sh to source.\n"
        f"packages:\n"
        f"  intel-oneapi-mpi:\n"
        f"    externals:\n"
        f"    - spec: intel-oneapi-mpi@{version} ~envmods\n"
        f"      prefix: {prefix}\n"
        f"    buildable: false\n"
    )


def write_venv_externals(prefix: str | Path, root: str | Path | None = None) -> list[Path]:
    """Write :data:`VENV_MPI_INCLUDE` for every environment under ``environments/``
    whose spack.yaml includes it; returns the files written."""
    prefix = Path(prefix).resolve()
    if not (prefix / "bin" / "mpirun").exists():
        raise HpcvalError(f"{prefix}: no bin/mpirun: not a venv with the Intel MPI wheels")
    version = venv_intel_mpi(prefix)
    text = venv_externals_yaml(oneapi_tree(prefix, version), version)
    written = []
    envs = Path(root or project_root()) / "environments"
    for spack_yaml in sorted(envs.glob("*/spack.yaml")):
        if VENV_MPI_INCLUDE not in spack_yaml.read_text():
            continue
        target = spack_yaml.parent / VENV_MPI_INCLUDE
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
        written.append(target)
    return written


#: Packages whose programs hpcval's checks run, each built against one MPI stack, and
#: the feature a programming environment offering it gets (checks select on these,
#: e.g. ``valid_prog_environs = ["+mpi +imb"]``).
BENCHMARK_PACKAGES = {"intel-mpi-benchmarks": "imb", "osu-micro-benchmarks": "omb",
                      "ior": "ior", "hpcval-cfdio": "cfdio"}


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
