"""``hpcval spack doctor``: what ``spack install`` of an environment assumes, checked
before it starts (declared externals and compilers, the lock, hpcval's proxies, and the
sources an offline install needs)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
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
        reported = slurm_version(base / "bin" / "srun")
        if version not in reported.split():
            problems.append(f"{label}: srun --version says {reported or 'nothing'}, "
                            f"not {version}")
    return problems


#: What Slurm's commands say where no controller is configured yet (no slurm.conf, no
#: DNS SRV record): true of a fresh `make system-deps` host, and no fault of the install.
NO_CONTROLLER = ("Could not establish a configuration source", "cannot stat file",
                 "resolve_ctls_from_dns_srv", "Unable to process configuration file")


def slurm_version(srun: Path) -> str:
    """What ``srun --version`` says, one line (``slurm-wlm 22.05.8``). Where no
    controller is configured (no slurm.conf: srun stops before printing its version) it
    is asked again with a minimal configuration of its own that only names a controller;
    what still fails is its last line of output."""
    import tempfile

    output = (_run_probe(srun, ["--version"]) or "").strip()
    if output and not any(m in output for m in NO_CONTROLLER):
        return " / ".join(output.splitlines())
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "slurm.conf"
        conf.write_text("ClusterName=hpcval-probe\nSlurmctldHost=localhost\n")
        try:
            proc = subprocess.run([str(srun), "--version"], capture_output=True, text=True,
                                  timeout=60, check=False,
                                  env={**os.environ, "SLURM_CONF": str(conf)})
            output = (proc.stdout + proc.stderr).strip()
        except (OSError, subprocess.TimeoutExpired):
            output = ""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


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
#: tree), where the mirrors and the source cache would keep it, and whether they do;
#: and per root of the environment, which of those sources its install needs.
SOURCES_SCRIPT = r"""
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
sources, index, needs = [], {}, {}
for spec in env.all_specs():
    if spec.external or spec.dag_hash() in needs:
        continue
    needs[spec.dag_hash()] = []
    if "dev_path" in spec.variants or spec.installed:
        continue
    try:
        stages = list(spec.package.stage)
    except Exception as err:  # a package that cannot say what it fetches
        needs[spec.dag_hash()].append(len(sources))
        sources.append({"spec": spec.format("{name}@{version}"), "error": str(err)})
        continue
    for stage in stages:
        fetcher = stage.default_fetcher
        url = getattr(fetcher, "url", None)
        if url is None:
            continue  # nothing to fetch (bundle packages, runtimes)
        key = (url, getattr(fetcher, "digest", None))
        if key not in index:  # the same archive for another spec (one build per MPI)
            index[key] = len(sources)
            paths = list(stage.mirror_layout) if stage.mirror_layout else []
            found = [os.path.join(root, p) for root in [*local, cache] for p in paths
                     if os.path.exists(os.path.join(root, p))]
            if url.startswith("file://") and os.path.exists(spack.util.url.local_file_path(url)):
                found.append(url)  # on this machine already (hpcval's own checkout)
            sources.append({"spec": spec.format("{name}@{version}"), "url": url,
                            "sha256": getattr(fetcher, "digest", None)
                            or getattr(fetcher, "commit", None),
                            "kind": type(fetcher).__name__, "paths": paths, "found": found})
        needs[spec.dag_hash()].append(index[key])
roots = []
for user, root in env.concretized_specs():
    wanted = set()
    for dep in root.traverse(deptype="all"):
        wanted.update(needs.get(dep.dag_hash(), []))
    roots.append({"spec": str(user), "hash": root.dag_hash(), "installed": root.installed,
                  "sources": sorted(wanted)})
print("HPCVAL-SOURCES " + json.dumps({"local": local, "remote": remote, "cache": cache,
                                      "sources": sources, "roots": roots}))
"""


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


def _checksum(src: dict[str, Any]) -> str | None:
    """The sha256 an archive must have (None: a git source, or no checksum)."""
    digest = src.get("sha256")
    return str(digest) if src.get("kind") == "URLFetchStrategy" and digest else None


def corrupt_sources(report: dict[str, Any]) -> list[str]:
    """One line per archive in a mirror or the source cache whose sha256 is not the
    one Spack's package declares (truncated, empty, or another file): named with the
    expected and the actual sha256. Spack would stop on it mid-install."""
    from hpcval.spack.mirror import archive_problem, manifest_sha256

    problems = []
    for src in report.get("sources", []):
        for path in src.get("found") or []:
            # a source without a checksum (STREAM, a git clone): the mirror's manifest's
            expected = _checksum(src) or (manifest_sha256(path) if os.path.isfile(path)
                                          else None)
            if expected and not str(path).startswith("file://") and os.path.isfile(path):
                problem = archive_problem(path, expected)
                if problem:
                    problems.append(f"source of {src['spec']}: {problem}")
    return problems


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
        checksum = (f"sha256 {src['sha256']}" if _checksum(src) else
                    f"{src.get('kind')} {src.get('sha256') or 'no checksum or commit'}")
        where = src["paths"][0] if src.get("paths") else "no mirror path"
        problems.append(f"missing source: {src['spec']}: {src['url']} ({checksum}); "
                        f"belongs at <mirror>/{where} ({mirrors})")
    return problems


def _usable(src: dict[str, Any]) -> bool:
    """A source an offline install finds: present and (where it has one) of its sha256."""
    if src.get("error") or not src.get("found"):
        return False
    expected = _checksum(src)
    if not expected:
        return True
    from hpcval.spack.mirror import sha256_of

    return any(str(p).startswith("file://") or (os.path.isfile(p) and sha256_of(p) == expected)
               for p in src["found"])


def installable_roots(report: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """(roots an offline install can build now, {root spec: the specs whose sources it
    lacks}) from :func:`mirror_sources`' report."""
    sources = report.get("sources", [])
    usable = [_usable(s) for s in sources]
    ready, blocked = [], {}
    for root in report.get("roots", []):
        lacking = sorted({sources[i]["spec"] for i in root["sources"] if not usable[i]})
        if lacking:
            blocked[root["spec"]] = lacking
        else:
            ready.append(root)
    return ready, blocked


def _mirror_manifest_problems() -> list[str]:
    """Every archive of the site's local mirror checked against the mirror's manifest
    (``hpcval spack mirror`` writes it), not only those a Spack package checksums."""
    from hpcval.spack.mirror import default_mirror, manifest_problems

    mirror = default_mirror()
    return manifest_problems(mirror) if mirror is not None and mirror.is_dir() else []


@dataclass
class Diagnosis:
    """What ``hpcval spack doctor`` found: what is broken (an install would fail or
    build the wrong thing), notes, and, per root, whether an offline install can
    build it now (:attr:`blocked`: root -> the specs whose sources it lacks)."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    ready: list[str] = field(default_factory=list)
    blocked: dict[str, list[str]] = field(default_factory=dict)
    #: the DAG hashes of :attr:`ready`, in the same order
    ready_hashes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """``ready``: install all; ``subset``: only sources missing, and some roots
        can be built; ``broken``: anything else."""
        if self.problems or (self.blocked and not self.ready):
            return "broken"
        return "subset" if self.blocked or self.missing else "ready"


#: ``hpcval spack doctor``'s exit status per verdict (docs/spack.md).
DOCTOR_EXIT = {"ready": 0, "subset": 1, "broken": 3}


def doctor(env_dir: str | Path) -> Diagnosis:
    """What ``spack install`` of an environment assumes: declared externals and
    compilers (no Spack needed), the lock naming the declared target, STREAM's size,
    and every source an offline install needs, each archive verified against its
    sha256 (with Spack); which roots an offline install can build now."""
    from hpcval.spack.streamsize import stream_size_problems

    env_dir = Path(env_dir)
    found = Diagnosis(problems=check_declared(env_dir))
    problems, notes = found.problems, found.notes
    target = declared_target(env_dir)
    lock_path = env_dir / "spack.lock"
    lock = None
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
    problems += stream_size_problems(env_dir, lock)
    problems += _mirror_manifest_problems()
    if find_spack() is None:
        problems.append(f"{NOT_FOUND}: cannot list the sources an install needs")
        return found
    if lock is None:
        return found
    report = mirror_sources(env_dir)
    problems += [p for p in corrupt_sources(report)
                 if not any(p.split(": ", 2)[1] in q for q in problems)]
    found.missing = source_problems(report)
    ready, found.blocked = installable_roots(report)
    found.ready = [r["spec"] for r in ready]
    found.ready_hashes = [r["hash"] for r in ready]
    for mirror in report.get("remote") or []:
        notes.append(f"remote source mirror {mirror}: an offline install cannot use it "
                     "(docs/spack.md: one local mirror, `mirrors::` in the site scope)")
    have = sum(1 for s in report["sources"] if _usable(s))
    notes.append(f"{have} of {len(report['sources'])} sources to fetch are in "
                 f"{', '.join(report['local']) or 'no local mirror'} or {report['cache']}"
                 " with their sha256")
    return found
