"""Finding Spack and reading what it built, for site configs and tests.

hpcval never imitates Spack: these helpers run the real ``spack`` command (found
on ``PATH`` or under ``$SPACK_ROOT``) and read the concrete spec Spack stores in
each install prefix (``<prefix>/.spack/spec.json``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from hpcval.errors import EnvironmentFault, HpcvalError, InputError
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


# --- The environments as files: manifest, includes, declared target, lock -----------------

#: What ``hpcval spack lock`` and the tests expect of every environment.
ENVIRONMENTS_DIR = "environments"


def environment_names(root: str | Path | None = None) -> list[str]:
    """Names of the environments of the checkout (directories holding a spack.yaml)."""
    envs = Path(root or project_root()) / ENVIRONMENTS_DIR
    return sorted(p.parent.name for p in envs.glob("*/spack.yaml"))


def resolve_environment(name_or_dir: str | Path, root: str | Path | None = None) -> Path:
    """``environments/<name>`` of the checkout, or a directory holding a spack.yaml;
    raises :class:`InputError` naming the environments there are."""
    candidate = Path(name_or_dir)
    if (candidate / "spack.yaml").is_file():
        return candidate.resolve()
    envs = Path(root or project_root()) / ENVIRONMENTS_DIR
    if "/" not in str(name_or_dir) and (envs / str(name_or_dir) / "spack.yaml").is_file():
        return envs / str(name_or_dir)
    known = ", ".join(environment_names(root)) or "none"
    raise InputError(f"--env {name_or_dir}: no such Spack environment (no spack.yaml); "
                     f"known: {known}")


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise InputError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping at the top")
    return data


def manifest_files(env_dir: str | Path) -> list[Path]:
    """spack.yaml of *env_dir* and the files it includes (relative to it), in order;
    an include that does not exist is listed too (Spack stops on it)."""
    env_dir = Path(env_dir)
    manifest = env_dir / "spack.yaml"
    includes = (_read_yaml(manifest).get("spack") or {}).get("include") or []
    files = [manifest]
    for entry in includes:
        path = entry if isinstance(entry, str) else (entry or {}).get("path", "")
        if path:
            files.append((env_dir / path) if not Path(path).is_absolute() else Path(path))
    return files


def packages_config(env_dir: str | Path) -> tuple[dict[str, Any], list[str]]:
    """The ``packages:`` configuration of the environment: spack.yaml over its included
    files (a package's keys from spack.yaml win, lists of externals are joined), and one
    problem line per include that is missing."""
    files = manifest_files(env_dir)
    problems = []
    merged: dict[str, dict[str, Any]] = {}
    # lowest precedence first: the includes in reverse order, then spack.yaml
    for path in [*reversed(files[1:]), files[0]]:
        if not path.is_file():
            hint = (" (run `hpcval spack externals`: `make setup` runs it only when it "
                    "builds the venv)" if path.name == VENV_MPI_INCLUDE else "")
            problems.append(f"{path}: included by {files[0]} but missing{hint}")
            continue
        data = _read_yaml(path)
        section = data.get("spack", data) if path == files[0] else data
        for name, entry in ((section or {}).get("packages") or {}).items():
            into = merged.setdefault(name, {})
            for key, value in (entry or {}).items():
                if key == "externals":
                    into["externals"] = [*value, *into.get("externals", [])]
                else:
                    into[key] = value
    return merged, problems


def declared_target(env_dir: str | Path) -> str:
    """The target every node of the environment is built for: the ``target=...``
    requirement of ``packages: all: require:``; :class:`InputError` where there is none."""
    packages, _ = packages_config(env_dir)
    require = (packages.get("all") or {}).get("require") or []
    for entry in [require] if isinstance(require, str) else require:
        text = entry if isinstance(entry, str) else (entry or {}).get("spec", "")
        for word in str(text).split():
            if word.startswith("target="):
                return word.split("=", 1)[1]
    raise InputError(f"{Path(env_dir) / 'spack.yaml'}: packages:all:require: no target=...; "
                     "declare the system's microarchitecture (e.g. `- target=cascadelake`)")


def lock_is_made_here(env_dir: str | Path) -> bool:
    """True where the environment's lock records paths of this checkout: it
    includes the generated Intel MPI external of the project venv
    (:data:`VENV_MPI_INCLUDE`) or develops a package from the checkout
    (``develop:``). Spack writes both as absolute paths, so such a lock is made
    on each machine (``hpcval spack lock``) and git-ignored, never committed."""
    env_dir = Path(env_dir)
    manifest = _read_yaml(env_dir / "spack.yaml").get("spack") or {}
    return VENV_MPI_INCLUDE in [str(i) for i in manifest.get("include") or []] \
        or bool(manifest.get("develop"))


def missing_lock(env_dir: str | Path) -> str:
    """What to say of an environment without its spack.lock."""
    env_dir = Path(env_dir)
    why = (" (this environment's lock records this checkout's paths, so it is made on each "
           "machine and not committed)" if lock_is_made_here(env_dir) else "")
    return f"{env_dir / 'spack.lock'}: missing: run `hpcval spack lock --env {env_dir.name}`{why}"


def read_lock(env_dir: str | Path) -> dict[str, Any]:
    """The environment's spack.lock (JSON)."""
    path = Path(env_dir) / "spack.lock"
    if not path.is_file():
        raise InputError(missing_lock(env_dir))
    try:
        return dict(json.loads(path.read_text()))
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err}): run `hpcval spack lock "
                         f"--env {Path(env_dir).name}`") from None


def paths_made_elsewhere(env_dir: str | Path, lock: dict[str, Any]) -> list[str]:
    """Paths the lock records that this checkout does not declare: an external
    whose prefix is not among the package's declared ``externals:``, a developed
    package whose ``dev_path`` is not the ``develop:`` path of spack.yaml. Spack
    installs a lock as it is, so such a lock was made in another checkout or on
    another machine and would build against what is not here."""
    env_dir = Path(env_dir)
    packages, _ = packages_config(env_dir)
    manifest = (_read_yaml(env_dir / "spack.yaml").get("spack") or {})
    develop = {name: os.path.normpath(env_dir.resolve() / str((entry or {}).get("path", name)))
               for name, entry in (manifest.get("develop") or {}).items()}
    found: list[str] = []
    for node in lock.get("concrete_specs", {}).values():
        name = node.get("name", "")
        path = (node.get("external") or {}).get("path")
        if path:
            declared = {os.path.normpath(str(e.get("prefix", "")))
                        for e in (packages.get(name) or {}).get("externals") or []}
            # an undeclared external is what Spack takes from the compiler (libc)
            if declared and os.path.normpath(path) not in declared:
                found.append(f"external {name} at {path}, declared here: "
                             f"{', '.join(sorted(declared)) or 'none'}")
        dev_path = (node.get("parameters") or {}).get("dev_path")
        if dev_path and os.path.normpath(dev_path) != develop.get(name):
            found.append(f"{name} developed from {dev_path}, here from "
                         f"{develop.get(name, 'nowhere')}")
    return sorted(set(found))


def node_target(node: dict[str, Any]) -> str:
    """The microarchitecture of a lock node."""
    target = node.get("arch", {}).get("target", "")
    return str(target.get("name", "") if isinstance(target, dict) else target)


def lock_roots(lock: dict[str, Any]) -> list[dict[str, Any]]:
    """Concrete root nodes of a lock, in the order of its roots."""
    specs = lock["concrete_specs"]
    return [specs[r["hash"]] for r in lock["roots"]]


def root_mpi_pairs(lock: dict[str, Any]) -> set[tuple[str, str]]:
    """(root package, MPI package) for every root of a lock that links an MPI."""
    specs = lock["concrete_specs"]
    pairs = set()
    for node in lock_roots(lock):
        for dep in node.get("dependencies", []):
            if "mpi" in dep.get("parameters", {}).get("virtuals", []):
                pairs.add((node["name"], specs[dep["hash"]]["name"]))
    return pairs


def wrong_targets(lock: dict[str, Any], target: str) -> list[str]:
    """``name@version target=...`` of every node of a lock not built for *target*."""
    return sorted({f"{n['name']}@{n['version']} target={node_target(n)}"
                   for n in lock["concrete_specs"].values() if node_target(n) != target})


# --- hpcval's own proxies: a version that changes only when their sources do ---------------

#: The proxies under ``proxies/`` that Spack builds by version: each has ``VERSION`` and
#: ``SHA256SUMS`` (the sha256 of every file its build uses), and its package
#: ``hpcval-<name>`` declares that one version.
VERSIONED_PROXIES = ("cfdio",)

#: The files of a proxy its build uses (patterns in ``proxies/<name>/``): what SHA256SUMS
#: lists and what the package copies into its stage. Not the README nor the scripts.
PROXY_BUILD_FILES = ("Makefile", "*.c", "*.h")

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


# --- hpcval spack doctor: what an install assumes, checked before it starts -------------

#: MPI providers: what their compiler wrapper says about itself (probe arguments, the words
#: its output must contain). Debian's /usr/bin/mpicc belongs to whichever MPI the
#: alternatives system chose, so a prefix of /usr must be checked for *which* MPI it holds.
MPI_PROBES: dict[str, tuple[list[str], str]] = {
    "openmpi": (["--showme:version"], "Open MPI"),
    "mpich": (["-v"], "MPICH"),
    "mvapich": (["-v"], "MVAPICH"),
    "mvapich2": (["-v"], "MVAPICH"),
    "intel-oneapi-mpi": (["-v"], "Intel(R) MPI"),
}

#: Library directories an external's prefix may keep its libraries in.
LIB_DIRS = ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/release", "lib64/slurm")

#: Libraries an external must hold, per package (glob patterns, any one suffices).
EXTERNAL_LIBS: dict[str, tuple[str, ...]] = {
    "openmpi": ("libmpi.so*",),
    "mpich": ("libmpi.so*", "libmpich.so*"),
    "mvapich": ("libmpi.so*", "libmpich.so*"),
    "intel-oneapi-mpi": ("libmpi.so*",),
    "slurm": ("libslurm.so*",),
    "rdma-core": ("libibverbs.so*",),
    "ucx": ("libucp.so*",),
    "libfabric": ("libfabric.so*",),
}

#: Programs an external must hold, per package (in its bin/).
EXTERNAL_PROGRAMS: dict[str, tuple[str, ...]] = {
    "openmpi": ("mpicc", "mpirun"),
    "mpich": ("mpicc", "mpiexec"),
    "mvapich": ("mpicc",),
    "intel-oneapi-mpi": ("mpicc", "mpirun"),
    "slurm": ("srun", "sbatch"),
    "gmake": ("make",),
    "autoconf": ("autoconf", "autoreconf"),
    "automake": ("automake", "aclocal"),
    "libtool": ("libtoolize", "libtool"),
    "m4": ("m4",),
    "pkgconf": ("pkgconf",),
}


def _spec_name_version(spec: str) -> tuple[str, str]:
    head = spec.split()[0]
    name, _, version = head.partition("@")
    return name, version


def _component_dir(package: str, prefix: Path, version: str) -> Path:
    """Where an external keeps bin/ and lib/: its prefix, or for oneAPI packages the
    component directory ``<prefix>/mpi/<major.minor>`` (``latest`` as a fallback)."""
    if package.startswith("intel-oneapi-"):
        short = ".".join(version.split(".")[:2])
        for candidate in (prefix / "mpi" / short, prefix / "mpi" / version,
                          prefix / "mpi" / "latest"):
            if candidate.is_dir():
                return candidate
        return prefix / "mpi" / short
    return prefix


def _run_probe(program: Path, args: list[str]) -> str | None:
    try:
        proc = subprocess.run([str(program), *args], capture_output=True, text=True,
                              timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout + proc.stderr


def check_external(package: str, spec: str, prefix: str | Path, where: str) -> list[str]:
    """Problems of one declared external: its prefix missing, a program or library it
    should hold missing, or a program that belongs to another package. One line each,
    naming *where* it is declared."""
    prefix = Path(prefix)
    label = f"{where}: external {spec} (prefix {prefix})"
    if not prefix.is_dir():
        return [f"{label}: prefix does not exist: install it there or fix the prefix"]
    _, version = _spec_name_version(spec)
    base = _component_dir(package, prefix, version)
    problems = []
    for program in EXTERNAL_PROGRAMS.get(package, ()):
        path = base / "bin" / program
        if not (path.is_file() and os.access(path, os.X_OK)):
            problems.append(f"{label}: no {path}")
    patterns = EXTERNAL_LIBS.get(package, ())
    if patterns:
        dirs = [base / d for d in LIB_DIRS]
        if package in ("openmpi", "mpich"):  # Debian's per-MPI directories
            dirs += [prefix / "lib/x86_64-linux-gnu" / package / "lib"]
        if not any(any(d.glob(p)) for d in dirs if d.is_dir() for p in patterns):
            problems.append(f"{label}: no {' or '.join(patterns)} in "
                            f"{', '.join(str(base / d) for d in LIB_DIRS[:3])}")
    probe = MPI_PROBES.get(package)
    mpicc = base / "bin" / "mpicc"
    if probe and mpicc.is_file():
        output = _run_probe(mpicc, probe[0])
        if output is None or probe[1] not in output:
            first = (output or "does not run").strip().splitlines()[:1]
            problems.append(f"{label}: {mpicc} is not {probe[1]}'s wrapper "
                            f"({mpicc} {' '.join(probe[0])}: {' '.join(first) or 'no output'})")
        elif version and ".".join(version.split(".")[:2]) not in output:
            problems.append(f"{label}: {mpicc} reports another version than {version}: "
                            f"{output.strip().splitlines()[0]}")
    if package == "slurm" and (base / "bin" / "srun").is_file() and version:
        output = _run_probe(base / "bin" / "srun", ["--version"]) or ""
        if version not in output:
            problems.append(f"{label}: srun --version says {output.strip() or 'nothing'}, "
                            f"not {version}")
    return problems


def check_compiler(spec: str, prefix: str | Path, compilers: dict[str, str],
                   where: str) -> list[str]:
    """Problems of one declared compiler: every language it claims
    (``languages:=...``) has an executable, which reports the declared version."""
    name, version = _spec_name_version(spec)
    label = f"{where}: compiler {spec} (prefix {prefix})"
    languages = ["c", "cxx", "fortran"]
    for word in spec.split():
        if word.startswith("languages"):
            listed = word.split("=", 1)[1].strip("'\"").split(",")
            languages = ["cxx" if lang == "c++" else lang for lang in listed]
    problems = []
    for language in languages:
        path = compilers.get(language)
        if not path:
            problems.append(f"{label}: no {language} compiler in extra_attributes:compilers")
            continue
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            problems.append(f"{label}: {language} compiler {path} does not exist")
            continue
        if name == "gcc" and version:
            output = (_run_probe(Path(path), ["-dumpfullversion"]) or "").strip()
            if output != version:
                problems.append(f"{label}: {path} is version {output or '?'}, "
                                f"not {version}: declare the version it is")
    return problems


def check_declared(env_dir: str | Path) -> list[str]:
    """Problems of the externals and compilers *env_dir* declares (spack.yaml and its
    includes): needs no Spack."""
    env_dir = Path(env_dir)
    packages, problems = packages_config(env_dir)
    where = str(env_dir / "spack.yaml")
    for package, entry in sorted(packages.items()):
        for external in entry.get("externals") or []:
            spec = str(external.get("spec", ""))
            prefix = external.get("prefix")
            if not prefix:
                continue  # module-based externals: nothing to look at here
            compilers = (external.get("extra_attributes") or {}).get("compilers")
            if compilers:
                problems += check_compiler(spec, prefix, compilers, where)
            else:
                problems += check_external(package, spec, prefix, where)
    return problems


#: Run by ``spack -e <env> python``: every source an install of the environment's
#: concrete specs would fetch (not installed, not external, not developed from a local
#: tree), where the mirrors and the source cache would keep it, and whether they do.
SOURCES_SCRIPT = r'''
import json
import os

import spack.config
import spack.environment as ev
import spack.mirrors.mirror
import spack.util.path
import spack.util.url

env = ev.active_environment()
local, remote = [], []
for name, mirror in spack.mirrors.mirror.MirrorCollection(source=True).items():
    url = mirror.fetch_url
    if url.startswith("file://"):
        local.append(spack.util.url.local_file_path(url))
    else:
        remote.append(f"{name} {url}")
cache = spack.util.path.canonicalize_path(spack.config.get("config:source_cache"))
sources, seen, fetched = [], set(), set()
for spec in env.all_specs():
    if spec.external or spec.dag_hash() in seen:
        continue
    seen.add(spec.dag_hash())
    if "dev_path" in spec.variants or spec.installed:
        continue
    try:
        stages = list(spec.package.stage)
    except Exception as err:  # a package that cannot say what it fetches
        sources.append({"spec": spec.format("{name}@{version}"), "error": str(err)})
        continue
    for stage in stages:
        fetcher = stage.default_fetcher
        url = getattr(fetcher, "url", None)
        if url is None:
            continue  # nothing to fetch (bundle packages, runtimes)
        key = (url, getattr(fetcher, "digest", None))
        if key in fetched:
            continue  # the same archive for another spec (e.g. one build per MPI)
        fetched.add(key)
        paths = list(stage.mirror_layout) if stage.mirror_layout else []
        found = [os.path.join(root, p) for root in [*local, cache] for p in paths
                 if os.path.exists(os.path.join(root, p))]
        if url.startswith("file://") and os.path.exists(spack.util.url.local_file_path(url)):
            found.append(url)  # on this machine already (hpcval's own checkout)
        sources.append({"spec": spec.format("{name}@{version}"), "url": url,
                        "sha256": getattr(fetcher, "digest", None)
                        or getattr(fetcher, "commit", None),
                        "kind": type(fetcher).__name__, "paths": paths, "found": found})
print("HPCVAL-SOURCES " + json.dumps({"local": local, "remote": remote, "cache": cache,
                                      "sources": sources}))
'''


def mirror_sources(env_dir: str | Path) -> dict[str, Any]:
    """What the environment's install would fetch and where the configured local
    mirrors and source cache hold it (runs :data:`SOURCES_SCRIPT` in Spack)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(SOURCES_SCRIPT)
        script = fh.name
    try:
        proc = run_spack(["python", script], env_dir, timeout=1800)
    finally:
        os.unlink(script)
    for line in proc.stdout.splitlines():
        if line.startswith("HPCVAL-SOURCES "):
            return dict(json.loads(line.split(" ", 1)[1]))
    raise EnvironmentFault(f"spack -e {env_dir} python: no source list "
                           f"({(proc.stderr.strip().splitlines() or ['no output'])[-1]})")


def source_problems(report: dict[str, Any]) -> list[str]:
    """One line per source an offline install would miss: the archive, its URL, its
    sha256 and where in the mirror it belongs."""
    problems = []
    mirrors = ", ".join(report.get("local") or []) or "no local mirror configured"
    for src in report.get("sources", []):
        if src.get("error"):
            problems.append(f"source of {src['spec']}: Spack cannot say what it fetches: "
                            f"{src['error']}")
            continue
        if src.get("found"):
            continue
        checksum = (f"sha256 {src['sha256']}" if src.get("kind") == "URLFetchStrategy"
                    and src.get("sha256") else
                    f"{src.get('kind')} {src.get('sha256') or 'no checksum or commit'}")
        where = src["paths"][0] if src.get("paths") else "no mirror path"
        problems.append(f"missing source: {src['spec']}: {src['url']} ({checksum}); "
                        f"belongs at <mirror>/{where} ({mirrors})")
    return problems


def doctor(env_dir: str | Path) -> tuple[list[str], list[str]]:
    """(problems, notes) of an environment before ``spack install``: declared externals
    and compilers (no Spack needed), the lock naming the declared target, and every
    source an offline install needs (with Spack)."""
    env_dir = Path(env_dir)
    problems = check_declared(env_dir)
    notes: list[str] = []
    target = declared_target(env_dir)
    lock_path = env_dir / "spack.lock"
    if lock_path.is_file():
        lock = read_lock(env_dir)
        wrong = wrong_targets(lock, target)
        if wrong:
            problems.append(f"{lock_path}: {len(wrong)} specs not built for target={target} "
                            f"(e.g. {wrong[0]}): run `hpcval spack lock --env {env_dir.name}`")
        elsewhere = paths_made_elsewhere(env_dir, lock)
        if elsewhere:
            more = f"; {len(elsewhere) - 1} more" if len(elsewhere) > 1 else ""
            problems.append(f"{lock_path}: made in another checkout or on another machine "
                            f"({elsewhere[0]}{more}): run `hpcval spack lock --env "
                            f"{env_dir.name}` here")
        for wrong in lock_proxy_versions(lock):
            problems.append(f"{lock_path}: {wrong}: run `hpcval spack lock --env "
                            f"{env_dir.name}`")
        for name in VERSIONED_PROXIES:
            nodes = [n for n in lock["concrete_specs"].values()
                     if n.get("name") == f"hpcval-{name}"]
            problem = proxy_version_problem(name) if nodes else None
            if problem and all("dev_path" in (n.get("parameters") or {}) for n in nodes):
                notes.append(f"{problem} (developed here: builds the working tree as it is)")
            elif problem:
                problems.append(problem)
    else:
        problems.append(missing_lock(env_dir))
    if find_spack() is None:
        problems.append(f"{NOT_FOUND}: cannot list the sources an install needs")
        return problems, notes
    report = mirror_sources(env_dir)
    problems += source_problems(report)
    for mirror in report.get("remote") or []:
        notes.append(f"remote source mirror {mirror}: an offline install cannot use it "
                     "(docs/spack.md: one local mirror, `mirrors::` in the site scope)")
    found = sum(1 for s in report["sources"] if s.get("found"))
    notes.append(f"{found} of {len(report['sources'])} sources to fetch are in "
                 f"{', '.join(report['local']) or 'no local mirror'} or {report['cache']}")
    return problems, notes


# --- hpcval spack lock: concretize in place, nothing tracked written but the lock -----------


def lock_environment(env_dir: str | Path, timeout: float = 3600) -> dict[str, Any]:
    """``spack concretize -f`` in *env_dir*, writing its spack.lock; fails, restoring the
    files, where Spack wrote into spack.yaml or an included file (something it had to
    detect on this host is undeclared) or where a node misses the declared target.
    Returns the seconds it took, the roots and the target."""
    import time

    env_dir = Path(env_dir)
    target = declared_target(env_dir)
    tracked = {p: p.read_bytes() for p in manifest_files(env_dir) if p.is_file()}
    if find_spack() is None:
        raise EnvironmentFault(NOT_FOUND)
    start = time.monotonic()
    proc = run_spack(["concretize", "-f"], env_dir, timeout=timeout)
    seconds = time.monotonic() - start
    changed = [p for p, data in tracked.items() if not p.is_file() or p.read_bytes() != data]
    for path in changed:
        path.write_bytes(tracked[path])
    if proc.returncode != 0:
        last = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        raise InputError(f"{env_dir / 'spack.yaml'}: spack concretize failed: "
                         f"{' / '.join(last[-6:]) or 'no output'}")
    if changed:
        raise InputError(f"{changed[0]}: Spack wrote into it while concretizing (restored): "
                         "declare what it detected on this host (compilers, externals)")
    lock = read_lock(env_dir)
    wrong = wrong_targets(lock, target)
    if wrong:
        raise InputError(f"{env_dir / 'spack.yaml'}: {len(wrong)} specs not built for "
                         f"target={target}, e.g. {wrong[0]}: give their requirements "
                         f"target={target} too")
    return {"env": env_dir.name, "seconds": seconds, "target": target,
            "roots": len(lock["roots"]), "specs": len(lock["concrete_specs"])}
