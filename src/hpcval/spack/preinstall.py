"""``hpcval spack doctor``: what ``spack install`` of an environment assumes, checked
before it starts (declared externals and compilers, the lock, hpcval's proxies, and the
sources an offline install needs)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from hpcval.core.errors import EnvironmentFault
from hpcval.spack.builds import NOT_FOUND, find_spack, run_spack
from hpcval.spack.environments import (
    declared_target,
    missing_lock,
    packages_config,
    paths_made_elsewhere,
    read_lock,
    wrong_targets,
)
from hpcval.spack.proxies import VERSIONED_PROXIES, lock_proxy_versions, proxy_version_problem

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
