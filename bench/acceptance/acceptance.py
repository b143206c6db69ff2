#!/usr/bin/env python3
"""The acceptance run: one prepared command that proves a node (16+ cores, GPUs).

Two steps (docs/performance.md, "Acceptance run"):

``prepare`` (here, with network): collects into one folder,
``bench/acceptance/offline/`` (git-ignored; give it to the device tool's
``carry``), everything the machine needs offline: the wheels of hpcval and of
its runtime dependencies for the target's Python (pip itself among them),
a source archive of this checkout, and the part of Intel MPI's PyPI wheels that
``mpirun``, ``IMB-MPI1``/``IMB-MPI1-GPU`` and ``mpicc`` need. Registry packages
only. It prints the folder's size (at most 64 MiB travel).

``run --out DIR`` (there, offline): installs from that folder into a venv and
runs, within ``--budget-s`` seconds of wall time, each step as a process of its
own that is stopped (SIGTERM, then SIGKILL) when the budget runs out, keeping
what finished: the node's facts; two sites scaffolded with ``hpcval site new``;
the sized memory and I/O checks at ``--budget quick`` on all cores; the verdict
experiment on the second site (5 clean IMB PingPong runs, then one beside 2
busy loops per core);
where ``nvidia-smi`` sees a GPU, hpcval's GPU checks and GPU health audit
(``gpubench`` built with the machine's ``nvcc``) and the GPU probe of ``hpcval
vet``. It writes under DIR: ``steps.json`` (every step: command, exit code,
seconds, or why it did not run), ``logs/``, ``site/``, ``store/<site>/`` (each
site's results store: run reports, verdicts, history, HTML report), ``gpu/`` and
``summary.md`` (:mod:`summary`).

``run`` uses only the Python standard library: it starts before anything is
installed. ``prepare`` runs in the project venv (``.venv/bin/python``) and downloads
the wheels with :mod:`hpcval.offline.wheels`, the wheelhouse of ``hpcval offline
bundle`` (docs/spack.md, section 1).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import lzma
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
#: The folder ``prepare`` fills and the device tool carries (git-ignored).
OFFLINE = HERE / "offline"
#: What travels at most (the device tool's limit for the working tree and carried paths).
CARRY_LIMIT = 64 << 20
#: The GPU machines' Python (their image's python3 is Python 3.12.3, in a venv
#: with numpy, scipy and matplotlib), unless --python-version says otherwise.
TARGET_PYTHON = "3.12"
#: The target's platform tags, newest first (``prepare`` downloads the wheels with
#: hpcval.offline.wheels, which takes every older tag of the first as pip does).
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64",
             "manylinux1_x86_64")
#: Distributions not carried, and why. The large numerical ones are in the device
#: image's Python (its package list): ``run`` layers that
#: Python's site-packages under its venv. polars is needed by ReFrame's results
#: storage only, which hpcval does not use (hpcval keeps its own store).
NOT_CARRIED: dict[str, str] = {
    **{name: "in the target's Python already (the device image's package list)"
       for name in ("numpy", "scipy", "matplotlib", "contourpy", "fonttools", "kiwisolver",
                    "pillow")},
    "polars": "ReFrame's optional results storage, unused by hpcval",
    "polars-runtime-32": "ReFrame's optional results storage, unused by hpcval",
}
IMPI_VERSION = "2021.18.1"
#: What is taken from Intel MPI's wheels (paths under ``<name>.data/data/``): the
#: launcher (Hydra), the MPI library (and libmpifort, which ``mpicc`` links) and
#: libfabric with its shared-memory and TCP
#: providers, IMB-MPI1 and IMB-MPI1-GPU, the C compiler wrappers and headers, the
#: configuration and the tuning tables of one-node runs (shared memory, shm + OFI,
#: generic), the licences.
IMPI_FILES = (
    "bin/mpirun", "bin/mpiexec.hydra", "bin/hydra_pmi_proxy",
    "bin/hydra_bstrap_proxy", "bin/IMB-MPI1", "bin/IMB-MPI1-GPU", "bin/mpicc", "bin/mpigcc",
    "lib/libmpi.so.12.0.0", "lib/libmpifort.so.12.0.0", "lib/libfabric.so.1",
    "lib/libshm-fi.so", "lib/libtcp-fi.so", "lib/librxm-fi.so", "include/mpi.h", "include/mpio.h",
)
IMPI_DIRS = ("share/doc/mpi/licensing/",)
IMPI_ETC = re.compile(r"opt/mpi/etc/(.*\.conf|tuning_[a-z]+_shm(-ofi)?\.dat|tuning_generic_.*)$")
#: Names a file is also found by; the wheels hold copies, the folder one file and links.
IMPI_LINKS = {"lib/libmpi.so.12.0.0": ("lib/libmpi.so.12.0", "lib/libmpi.so.12", "lib/libmpi.so"),
              "lib/libmpifort.so.12.0.0": ("lib/libmpifort.so.12.0", "lib/libmpifort.so.12",
                                           "lib/libmpifort.so"),
              "lib/libfabric.so.1": ("lib/libfabric.so",),
              "bin/mpiexec.hydra": ("bin/mpiexec",)}
#: The node's checks (sized memory and I/O, GPU) run on one site, the verdict
#: experiment on another: a recording run writes no reference for a figure at or
#: below zero (``cfdio_read_check`` cache_resident is 0 when the page cache was
#: dropped; docs/references.md), and every later validate of that site refuses to
#: run without one; PingPong's site holds PingPong's references alone.
SITE = "acceptance"
VERDICT_SITE = "acceptance-verdict"
SITES = (SITE, VERDICT_SITE)
#: Rank counts of the cfdio output-cost and read checks (their parameters).
OUTPUT_RANKS = (1, 2, 4, 8, 16, 32, 64)
READERS = (1, 2, 4, 8)
STRATEGIES = ("none", "per-rank-then-gather", "gather-to-root", "mpiio")
GPU_CHECKS = ("babelstream_triad_check", "gpubench_copy_check", "gpubench_gemm_check",
              "gpubench_p2p_check", "nccl_allreduce_check", "imb_gpu_pingpong_check",
              "gpu_health_audit_check")
PINGPONG = "imb_pingpong_check%cache=warm"
CLEAN_RUNS = 5
#: The parts of a run (``--parts``): the sized checks (and, on a GPU node, the
#: GPU checks in the same recording run), the node's GPU audit and vet probe,
#: the verdict experiment.
PARTS = ("checks", "gpu", "verdict")
NOT_ASKED = "not asked for (--parts)"
#: Seconds kept back at the end for the report, the store copy and the summary.
RESERVE_S = 25.0


def log(msg: str) -> None:
    print(f"acceptance: {msg}", file=sys.stderr, flush=True)


def du(path: Path) -> int:
    """Bytes of the files under *path* (links not followed)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() or p.is_symlink())


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


# -- prepare ---------------------------------------------------------------

def _pip(python: str, *args: str) -> None:
    cmd = [python, "-m", "pip", *args]
    log("+ " + " ".join(cmd))
    subprocess.run(cmd, check=True)


def _dist_name(wheel: Path) -> str:
    return wheel.name.split("-", 1)[0].lower().replace("_", "-")


def _source_archive(dest: Path) -> str:
    """``git archive`` of the checkout as it is (uncommitted changes to tracked
    files included, through ``git stash create``)."""
    tree = subprocess.run(["git", "-C", str(REPO), "stash", "create"], capture_output=True,
                          text=True, check=True).stdout.strip() or "HEAD"
    subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar.gz",
                    "--prefix=hpcval/", "-o", str(dest), tree], check=True)
    return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()


def _impi_subset(wheels: Iterable[Path], dest: Path) -> list[str]:
    """The Intel MPI files ``run`` needs, as a prefix tree packed in *dest*."""
    taken: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "impi"
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as z:
                for info in z.infolist():
                    _, _, rel = info.filename.partition(".data/data/")
                    if rel in IMPI_FILES or rel.startswith(IMPI_DIRS) or IMPI_ETC.match(rel):
                        target = root / rel
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(z.read(info))
                        mode = (info.external_attr >> 16) & 0o777
                        target.chmod(mode or (0o755 if rel.startswith("bin/") else 0o644))
                        taken.append(rel)
        missing = sorted(set(IMPI_FILES) - set(taken))
        if missing:
            raise SystemExit(f"prepare: the Intel MPI wheels lack {', '.join(missing)} "
                             f"(version {IMPI_VERSION}); exit 3")
        for real, names in IMPI_LINKS.items():
            for name in names:
                (root / name).symlink_to(Path(real).name)
        with tarfile.open(dest, "w:xz") as tar:
            tar.add(root, arcname=".")
    return sorted(taken)


def prepare(args: argparse.Namespace) -> int:
    out: Path = args.folder
    cache: Path = args.cache
    if out.exists() and not out.is_dir():
        print(f"prepare: --folder {out}: a file, not a folder; exit 2", file=sys.stderr)
        return 2
    if out.is_dir() and any(out.iterdir()) and not (out / "manifest.json").is_file():
        # the folder is emptied first: only one `prepare` made (it has its manifest)
        print(f"prepare: --folder {out}: not empty and not a folder `prepare` made (no "
              "manifest.json): give a new or empty folder; nothing removed; exit 2",
              file=sys.stderr)
        return 2
    if out.exists():
        shutil.rmtree(out)
    wheels = out / "wheels"
    wheels.mkdir(parents=True)
    cache.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    target = ["--only-binary=:all:", "--python-version", args.python_version,
              "--implementation", "cp", *[f"--platform={p}" for p in PLATFORMS]]
    # hpcval's own wheel, built from this checkout
    _pip(python, "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(REPO))
    requirements = _requirements(REPO / "pyproject.toml")
    # the wheelhouse of `hpcval offline bundle` (docs/spack.md, section 1): the same
    # download for the target's platform tags and Python, its tags checked
    from hpcval.core.errors import HpcvalError
    from hpcval.offline import wheels as offline_wheels

    with tempfile.TemporaryDirectory() as tmp:
        try:
            offline_wheels.download(["pip", *requirements], Path(tmp), PLATFORMS[0],
                                    args.python_version)
            foreign = offline_wheels.foreign_wheels(Path(tmp), PLATFORMS[0],
                                                    args.python_version)
        except HpcvalError as err:
            print(f"prepare: {err}; exit 3", file=sys.stderr)
            return 3
        if foreign:
            print(f"prepare: {foreign[0]}; exit 3", file=sys.stderr)
            return 3
        left_out: dict[str, str] = {}
        for whl in sorted(Path(tmp).glob("*.whl")):
            name = _dist_name(whl)
            if name in NOT_CARRIED:
                left_out[whl.name] = NOT_CARRIED[name]
                continue
            shutil.copy2(whl, wheels / whl.name)
    impi_wheels = [f"impi-rt=={IMPI_VERSION}", f"impi-devel=={IMPI_VERSION}"]
    _pip(python, "download", "--quiet", "--no-deps", *target, "-d", str(cache), *impi_wheels)
    found = [next(cache.glob(f"{n.split('==')[0].replace('-', '_')}-{IMPI_VERSION}-*.whl"))
             for n in impi_wheels]
    taken = _impi_subset(found, out / "impi.tar.xz")
    commit = _source_archive(out / "hpcval-src.tar.gz")
    manifest = {
        "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit,
        "python_version": args.python_version,
        "platforms": list(PLATFORMS),
        "wheels": sorted(p.name for p in wheels.glob("*.whl")),
        "not_carried": left_out,
        "intel_mpi": {"version": IMPI_VERSION, "from": [p.name for p in found],
                      "files": taken, "wheel_bytes": sum(p.stat().st_size for p in found)},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    size = du(out)
    print(f"prepared {out} for Python {args.python_version}: {mib(size)} "
          f"({len(manifest['wheels'])} wheels {mib(du(wheels))}, Intel MPI subset "
          f"{mib(du(out / 'impi.tar.xz'))} of {mib(manifest['intel_mpi']['wheel_bytes'])} "
          f"of wheels, source {mib(du(out / 'hpcval-src.tar.gz'))})")
    for name, why in left_out.items():
        print(f"  not carried: {name}: {why}")
    if size > CARRY_LIMIT:
        print(f"prepare: {out} is {mib(size)}, over the {mib(CARRY_LIMIT)} that travel; exit 3",
              file=sys.stderr)
        return 3
    return 0


def _requirements(pyproject: Path) -> list[str]:
    """``[project] dependencies`` of pyproject.toml (tomllib from Python 3.11)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise SystemExit("prepare: needs Python 3.11+ (tomllib) to read pyproject.toml") \
            from None
    with pyproject.open("rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


# -- run -------------------------------------------------------------------

@dataclass
class Step:
    """One step of the run: what ran, how it ended, or why it did not run."""

    name: str
    what: str
    command: list[str] = field(default_factory=list)
    status: str = "not run"  # ok, failed (exit N), stopped at the budget, not run
    exit_code: int | None = None
    seconds: float | None = None
    reason: str = ""
    log: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Budget:
    def __init__(self, seconds: float) -> None:
        self.start = time.monotonic()
        self.end = self.start + seconds

    def left(self) -> float:
        return self.end - time.monotonic() - RESERVE_S

    def elapsed(self) -> float:
        return time.monotonic() - self.start


class Runner:
    def __init__(self, out: Path, budget: Budget, dry: bool, env: dict[str, str]) -> None:
        self.out = out
        self.budget = budget
        self.dry = dry
        self.env = env
        self.steps: list[Step] = []
        (out / "logs").mkdir(parents=True, exist_ok=True)

    def save(self) -> None:
        data = {"budget_s": self.budget.end - self.budget.start,
                "elapsed_s": round(self.budget.elapsed(), 1),
                "steps": [asdict(s) for s in self.steps]}
        tmp = self.out / "steps.json.tmp"
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        tmp.replace(self.out / "steps.json")

    def skip(self, name: str, what: str, reason: str, **extra: Any) -> Step:
        step = Step(name, what, reason=reason, extra=extra)
        self.steps.append(step)
        self.save()
        log(f"{name}: not run: {reason}")
        return step

    def run(self, name: str, what: str, command: Sequence[str], cap: float | None = None,
            cwd: Path | None = None, need: float = 20.0, env: dict[str, str] | None = None
            ) -> Step:
        """Run *command* in a process group of its own, its output in logs/NAME.log,
        stopped when the budget (or *cap* seconds) runs out."""
        step = Step(name, what, list(command), log=f"logs/{name}.log")
        self.steps.append(step)
        left = self.budget.left()
        if self.dry:
            step.reason = "--dry: not run"
            self.save()
            log(f"{name}: would run: {' '.join(command)}")
            return step
        if left < need:
            step.reason = (f"budget: {max(left, 0):.0f} s left of the run's budget, "
                           f"this step needs about {need:.0f} s")
            self.save()
            log(f"{name}: not run: {step.reason}")
            return step
        timeout = min(left, cap) if cap else left
        log(f"{name}: {' '.join(command)}  (up to {timeout:.0f} s)")
        t0 = time.monotonic()
        with (self.out / step.log).open("w") as fh:
            fh.write("+ " + " ".join(command) + "\n")
            fh.flush()
            try:
                proc = subprocess.Popen(list(command), stdout=fh, stderr=subprocess.STDOUT,
                                        cwd=cwd, env=env or self.env, start_new_session=True)
            except OSError as err:
                step.status, step.reason = "failed", f"cannot start: {err}"
                self.save()
                return step
            try:
                step.exit_code = proc.wait(timeout=timeout)
                step.status = "ok" if step.exit_code == 0 else f"failed (exit {step.exit_code})"
            except subprocess.TimeoutExpired:
                step.exit_code = stop(proc)
                step.status = "stopped at the budget"
                step.reason = (f"stopped after {time.monotonic() - t0:.0f} s (SIGTERM): "
                               "what finished is kept")
        step.seconds = round(time.monotonic() - t0, 1)
        self.save()
        log(f"{name}: {step.status} in {step.seconds} s")
        return step


def stop(proc: subprocess.Popen[Any], grace: float = 20.0) -> int | None:
    """SIGTERM to *proc*'s process group (hpcval validate then stores what finished
    as interrupted), SIGKILL after *grace* seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def _capture(cmd: Sequence[str], timeout: float = 30) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


GPU_QUERY = "index,name,memory.total,pci.bus_id,compute_cap,driver_version"


def gpu_facts(csv_text: str) -> list[dict[str, str]]:
    """The GPUs of a ``nvidia-smi --query-gpu=... --format=csv`` output, one dict
    per GPU keyed by the query's field names (units dropped from the header:
    ``memory.total [MiB]`` is ``memory.total``)."""
    rows = list(csv.reader(io.StringIO(csv_text), skipinitialspace=True))
    if not rows:
        return []
    keys = [h.split(" [")[0].strip() for h in rows[0]]
    return [dict(zip(keys, (v.strip() for v in row), strict=False)) for row in rows[1:]
            if len(row) == len(keys)]


def node_facts(out: Path) -> dict[str, Any]:
    """What the node is: CPUs, memory, load, GPUs (nvidia-smi), nvcc."""
    facts: dict[str, Any] = {
        "host": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "kernel": platform.release(), "cores": os.cpu_count(),
        "python": platform.python_version(), "python_path": sys.executable,
        "uptime": (_capture(["uptime"]) or "").strip(),
        "loadavg": os.getloadavg()[0],
    }
    lscpu = _capture(["lscpu"]) or ""
    for line in lscpu.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("Model name", "L3 cache", "Socket(s)", "NUMA node(s)"):
            facts[key.strip().lower().replace(" ", "_").replace("(s)", "s")] = value.strip()
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                facts["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    gpu_dir = out / "gpu"
    query = _capture(["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv"])
    if query is None:
        facts["gpu"] = None
        facts["gpu_reason"] = ("nvidia-smi not found on PATH" if shutil.which("nvidia-smi")
                               is None else "nvidia-smi failed or timed out")
    else:
        gpu_dir.mkdir(parents=True, exist_ok=True)
        (gpu_dir / "nvidia-smi-query.csv").write_text(query)
        facts["gpu"] = gpu_facts(query)
        if not facts["gpu"]:
            facts["gpu_reason"] = "nvidia-smi lists no GPU"
        xml = _capture(["nvidia-smi", "-q", "-x"])
        if xml:
            (gpu_dir / "nvidia-smi-q.xml").write_text(xml)
    nvcc = shutil.which("nvcc")
    facts["nvcc"] = nvcc
    if nvcc:
        facts["nvcc_version"] = (_capture([nvcc, "--version"]) or "").strip().splitlines()[-1:]
    return facts


def _host_paths(python: str) -> list[str]:
    """site-packages of the Python the venv is made from (layered under the venv)."""
    code = ("import json, site, sysconfig; p = site.getsitepackages() + "
            "[sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']]; "
            "print(json.dumps(list(dict.fromkeys(p))))")
    text = _capture([python, "-c", code]) or "[]"
    return [p for p in json.loads(text) if Path(p).is_dir()]


def _untar(archive: Path, dest: Path) -> None:
    """Unpack one of prepare's archives (relative paths and links only); a
    truncated or damaged one is named (RuntimeError)."""
    try:
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, filter="data")
            else:  # Python < 3.11.4: no filters; the archive is prepare's own
                tar.extractall(dest)  # noqa: S202
    except (EOFError, tarfile.TarError, lzma.LZMAError, zlib.error) as err:
        raise RuntimeError(f"{archive}: truncated or damaged ({err}): run `prepare` again "
                           "and carry the folder whole") from None


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def install(r: Runner, offline: Path, work: Path, python: str) -> Path | None:
    """Unpack the source, make the venv, install what the host Python lacks.
    Returns the checkout's root, or None where the install failed."""
    src = work / "hpcval"
    venv = work / "venv"
    if r.dry:
        r.skip("install", "venv from the offline folder", "--dry: not run",
               offline=str(offline))
        return None
    t0 = time.monotonic()
    step = Step("install", "venv from the offline folder", [python], log="logs/install.log")
    r.steps.append(step)
    lines: list[str] = []
    try:
        manifest = json.loads((offline / "manifest.json").read_text())
        _untar(offline / "hpcval-src.tar.gz", work)
        subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True,
                       capture_output=True, text=True)
        vpy = _venv_python(venv)
        site_dir = Path(subprocess.run(
            [str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True).stdout.strip())
        host = _host_paths(python)
        (site_dir / "_acceptance_host.pth").write_text("".join(p + "\n" for p in host))
        lines.append(f"host site-packages layered under the venv: {host}")
        names = ("import importlib.metadata as m, json; print(json.dumps(sorted({(d.metadata["
                 "'Name'] or '').lower().replace('_', '-') for d in m.distributions()})))")
        have = set(json.loads(subprocess.run([str(vpy), "-c", names], check=True,
                                             capture_output=True, text=True).stdout))
        wheels = sorted((offline / "wheels").glob("*.whl"))
        pip_whl = next(w for w in wheels if _dist_name(w) == "pip")
        chosen = [w for w in wheels if _dist_name(w) == "hpcval" or
                  (_dist_name(w) not in have and _dist_name(w) != "pip")]
        lines.append(f"host has {len(have)} distributions; installing {len(chosen)} of "
                     f"{len(wheels)} carried wheels: {', '.join(w.name for w in chosen)}")
        cmd = [str(vpy), str(pip_whl / "pip"), "install", "--quiet", "--no-index", "--no-deps",
               "--no-compile", "--disable-pip-version-check", *map(str, chosen)]
        step.command = cmd
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines.append(done.stdout + done.stderr)
        if done.returncode != 0:
            raise RuntimeError(f"pip install exited with {done.returncode}")
        _untar(offline / "impi.tar.xz", venv)
        lines.append(f"Intel MPI {manifest['intel_mpi']['version']} subset unpacked into {venv}")
        check = subprocess.run(
            [str(vpy), "-c", "import hpcval, reframe, numpy, scipy, ruptures, yaml; "
             "print('imports ok: reframe', reframe.VERSION, 'numpy', numpy.__version__, "
             "'scipy', scipy.__version__)"], capture_output=True, text=True, check=False)
        lines.append(check.stdout + check.stderr)
        if check.returncode != 0:
            raise RuntimeError("the venv cannot import hpcval's dependencies: "
                               + (check.stderr.strip().splitlines() or ["?"])[-1])
        mpi = subprocess.run([str(venv / "bin" / "mpirun"), "-n", "2", "true"],
                             capture_output=True, text=True, check=False, timeout=60,
                             env={**r.env, "PATH": f"{venv / 'bin'}:{r.env['PATH']}",
                                  "LD_LIBRARY_PATH": str(venv / "lib"),
                                  "FI_PROVIDER_PATH": str(venv / "lib")})
        lines.append(f"mpirun -n 2 true: exit {mpi.returncode} {mpi.stderr.strip()[-300:]}")
        step.extra = {"wheels_installed": [w.name for w in chosen], "host_paths": host,
                      "mpirun_ok": mpi.returncode == 0,
                      "intel_mpi": manifest["intel_mpi"]["version"]}
        step.status, step.exit_code = "ok", 0
    except (OSError, subprocess.SubprocessError, RuntimeError, KeyError, StopIteration,
            ValueError, EOFError, tarfile.TarError, lzma.LZMAError, zlib.error) as err:
        step.status, step.exit_code = "failed (exit 3)", 3
        step.reason = f"{type(err).__name__}: {err}"
        lines.append(step.reason)
    step.seconds = round(time.monotonic() - t0, 1)
    (r.out / step.log).write_text("\n".join(lines) + "\n")
    r.save()
    log(f"install: {step.status} in {step.seconds} s")
    return src if step.status == "ok" else None


def largest(choices: Sequence[int], cores: int) -> int:
    return max([c for c in choices if c <= cores] or [choices[0]])


def busy_loops(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True)
            for _ in range(n)]


def refuse(msg: str, code: int) -> int:
    """One line naming what is wrong, and the exit code: 2 a wrong argument, 3
    the machine's fault (a folder that cannot be written, an install that
    failed)."""
    print(f"acceptance run: {msg}; exit {code}", file=sys.stderr)
    return code


def make_folder(path: Path, flag: str) -> int:
    """*path* made (with its parents) and writable: 0, else the exit code
    after one line (2: it is a file; 3: it cannot be made or written)."""
    if path.exists() and not path.is_dir():
        return refuse(f"{flag} {path}: a file, not a folder: give a folder (made if missing)",
                      2)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        return refuse(f"{flag} {path}: cannot write there: {err.strerror}", 3)
    return 0


#: Where a GPU node keeps nvidia-smi and nvcc when they are not on PATH.
TOOL_DIRS = ("/usr/local/nvidia/bin", "/usr/local/cuda/bin")


def run(args: argparse.Namespace) -> int:
    path = os.environ.get("PATH", "").split(":")
    os.environ["PATH"] = ":".join(path + [d for d in TOOL_DIRS if d not in path
                                          and Path(d).is_dir()])
    out: Path = args.out.resolve()
    offline: Path = args.offline.resolve()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or not parts <= set(PARTS):
        return refuse(f"--parts {args.parts!r}: give one or more of {', '.join(PARTS)}, "
                      "comma-separated", 2)
    if not (math.isfinite(args.budget_s) and args.budget_s > 0):
        return refuse(f"--budget-s {args.budget_s}: give the seconds of wall time the run may "
                      "take (e.g. 480)", 2)
    if not args.dry and not (offline / "manifest.json").is_file():
        return refuse(f"{offline}/manifest.json missing: run `prepare` first (and carry the "
                      "folder)", 2)
    code = make_folder(out, "--out") or (make_folder(Path(args.work).resolve(), "--work")
                                         if args.work else 0)
    if code:
        return code
    budget = Budget(args.budget_s)
    try:
        work = Path(args.work or tempfile.mkdtemp(prefix="hpcval-acceptance-")).resolve()
        facts = node_facts(out)
        (out / "machine.json").write_text(json.dumps(facts, indent=1) + "\n")
    except OSError as err:
        return refuse(f"{err.filename or out}: cannot write: {err.strerror}", 3)
    log(f"node: {facts.get('model_name', '?')}, {facts['cores']} cores, "
        f"GPU: {facts['gpu'] or facts.get('gpu_reason')}; {facts['uptime']}")
    r = Runner(out, budget, args.dry, dict(os.environ))
    src = install(r, offline, work, args.python)
    cores = int(facts["cores"] or 1)
    gpus = bool(facts.get("gpu"))
    no_gpu = f"no GPU ({facts.get('gpu_reason') or 'nvidia-smi lists none'})"
    venv = work / "venv"
    vpy = str(_venv_python(venv))
    hp = [vpy, "-m", "hpcval.cli"]
    ok = src is not None
    root = src or work / "hpcval"
    env = {**os.environ, "HPCVAL_ROOT": str(root), "HPCVAL_SPACK": "0",
           "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}", "PYTHONUNBUFFERED": "1"}
    r.env = env
    why_not = "the install failed (logs/install.log)"

    def step(name: str, what: str, cmd: list[str], **kw: Any) -> Step:
        if not ok and not args.dry:
            return r.skip(name, what, why_not)
        return r.run(name, what, cmd, cwd=root if ok else None, **kw)

    for name in SITES:
        made = step("site" if name == SITE else "site_verdict",
                    f"hpcval site new {name} (this node's topology and nvidia-smi)",
                    [*hp, "site", "new", name, "--scheduler", "local"], need=5)
        if made.status == "ok":
            (out / "site").mkdir(exist_ok=True)
            shutil.copy2(root / "site-configs" / name / "config.py",
                         out / "site" / f"{name}.config.py")
    gpu_env = dict(env)
    nvcc = shutil.which("nvcc")
    if gpus and nvcc:
        cap = str(facts["gpu"][0].get("compute_cap", "")).replace(".", "")
        arch = f"-gencode arch=compute_{cap},code=sm_{cap}" if cap.isdigit() else ""
        # cuBLAS found at run time where nvcc found it at build time
        cuda = Path(nvcc).resolve().parent.parent
        rpath = "".join(f" -Xlinker -rpath -Xlinker {d}" for d in (
            cuda / "lib64", cuda / "targets" / "x86_64-linux" / "lib") if d.is_dir())
        bindir = work / "gpu-bin"
        bindir.mkdir(exist_ok=True)
        build = step("gpu_build", "gpubench built with the machine's nvcc",
                     ["make", "-C", str(root / "proxies" / "gpubench"), f"NVCC={nvcc}",
                      f"CUDA_ARCH_FLAGS={arch}", f"NVCCFLAGS=-O2 -std=c++17{rpath}"],
                     cap=180, need=30)
        if build.status == "ok":
            shutil.copy2(root / "proxies" / "gpubench" / "gpubench", bindir / "gpubench")
        gpu_env["HPCVAL_GPU_DIR"] = str(bindir)
    elif gpus:
        r.skip("gpu_build", "gpubench built with the machine's nvcc",
               f"nvcc not found on PATH or in {', '.join(TOOL_DIRS)}")
    else:
        r.skip("gpu_build", "gpubench built with the machine's nvcc", no_gpu)
    # ReFrame selects a parameterised case by all of its parameters
    ranks = largest(OUTPUT_RANKS, cores)
    names = ["cfdio_stencil_check", "cfdio_triad_check",
             *(f"cfdio_output_cost_check%strategy={s}%ranks={ranks}" for s in STRATEGIES),
             f"cfdio_read_check%readers={largest(READERS, cores)}"]
    if gpus:
        names += GPU_CHECKS
    select = [a for n in names for a in ("-n", n)]
    if "checks" in parts:
        step("record", "sized memory and I/O checks at --budget quick on all cores"
             + (", GPU checks and GPU health audit" if gpus else "") + " (--record: writes the "
             "site's references)",
             [*hp, "validate", "--site", SITE, "--record", "--budget", "quick", "--",
              "-p", "impi", "-p", "plain", *select], need=60, env=gpu_env)
    else:
        r.skip("record", "sized memory and I/O checks", NOT_ASKED)
    if "gpu" in parts:
        # the GPU parts before the verdict experiment: on a lent GPU node they are what
        # the run is for, and the contended PingPong may take what is left of the budget
        if gpus:
            step("gpu_audit", "GPU health audit of the node (nvidia-smi -q -x)",
                 [vpy, "-m", "hpcval.node.gpu_audit", "--json"], need=10, cap=60)
            step("vet_gpu_probe", "hpcval vet's GPU probe on the node's GPUs",
                 [vpy, "-m", "hpcval.vet.gpu_probe", "--samples", "3"], need=40, cap=240,
                 env=gpu_env)
            step("vet", "hpcval vet on the site (needs a Slurm partition)",
                 [*hp, "vet", "--site", SITE, "--quiet"], need=10, cap=60)
        else:
            for name, what in (("gpu_audit", "GPU health audit of the node"),
                               ("vet_gpu_probe", "hpcval vet's GPU probe on the node's GPUs"),
                               ("vet", "hpcval vet on the site")):
                r.skip(name, what, no_gpu)
    else:
        for name in ("gpu_audit", "vet_gpu_probe", "vet"):
            r.skip(name, name, NOT_ASKED)
    if "verdict" in parts:
        step("verdict_record", "IMB PingPong, recording run of the verdict experiment's site",
             [*hp, "validate", "--site", VERDICT_SITE, "--record", "--", "-p", "impi",
              "-n", PINGPONG], need=25)
        clean_cmd = [*hp, "validate", "--site", VERDICT_SITE, "--", "-p", "impi", "-n", PINGPONG]
        for i in range(1, CLEAN_RUNS + 1):
            step(f"pingpong_clean_{i}", f"IMB PingPong, clean run {i} of {CLEAN_RUNS}",
                 clean_cmd, need=25)
        loops = 2 * cores
        if args.dry or (ok and r.budget.left() >= 25):
            hogs = [] if args.dry else busy_loops(loops)
            try:
                contended = step("pingpong_contended",
                                 f"IMB PingPong beside {loops} busy loops (2 per core)", clean_cmd,
                                 need=25)
            finally:
                for h in hogs:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(h.pid, signal.SIGKILL)
                    h.wait()
            contended.extra["busy_loops"] = loops
            r.save()
        else:
            r.skip("pingpong_contended", f"IMB PingPong beside {loops} busy loops (2 per core)",
                   why_not if not ok else f"budget: {max(r.budget.left(), 0):.0f} s left")
    else:
        for name in ("verdict_record", *(f"pingpong_clean_{i}" for i in range(1, 6)),
                     "pingpong_contended"):
            r.skip(name, name, NOT_ASKED)
    finish(r, root, vpy, ok and not args.dry)
    log(f"done in {budget.elapsed():.0f} s: {out / 'summary.md'}")
    if not ok and not args.dry:
        why = next((st.reason for st in r.steps if st.name == "install"), "") or "?"
        return refuse(f"the install failed ({why}): nothing ran (logs/install.log, "
                      "summary.md)", 3)
    return 0


def finish(r: Runner, root: Path, vpy: str, installed: bool) -> None:
    """The HTML report of the latest run, the store copied, the summary written."""
    for name in SITES:
        var = root / "var" / name
        if not (installed and var.is_dir()):
            continue
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([vpy, "-m", "hpcval.cli", "report", "--site", name],
                           stdout=(r.out / "logs" / f"report-{name}.log").open("w"),
                           stderr=subprocess.STDOUT, env=r.env, cwd=root, timeout=60,
                           check=False)
        dest = r.out / "store" / name
        if dest.exists():
            shutil.rmtree(dest)
        # stage/: the benchmarks' scratch (result files of the output checks): not kept
        shutil.copytree(var, dest, symlinks=True,
                        ignore=shutil.ignore_patterns("stage", "*.lock"))
    facts_end = {"uptime_end": (_capture(["uptime"]) or "").strip(),
                 "loadavg_end": os.getloadavg()[0]}
    machine = json.loads((r.out / "machine.json").read_text())
    (r.out / "machine.json").write_text(json.dumps({**machine, **facts_end}, indent=1) + "\n")
    r.save()
    # without the venv (--dry, a failed install) the summary is written by this
    # Python from this checkout's sources: it then reads only steps.json and machine.json
    python = vpy if installed else sys.executable
    env = r.env if installed else {**r.env, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run([python, str(HERE / "summary.py"), str(r.out)], env=env,
                          capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        log(f"summary: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    else:
        print(done.stdout, end="")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench/acceptance/acceptance.py",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="collect what the machine needs offline into one folder")
    p.add_argument("--folder", type=Path, default=OFFLINE,
                   help=f"the folder to fill (default {OFFLINE.relative_to(REPO)}, git-ignored)")
    p.add_argument("--python-version", default=TARGET_PYTHON,
                   help=f"the target's Python, major.minor (default {TARGET_PYTHON}: the "
                   "device machines' python3)")
    p.add_argument("--cache", type=Path,
                   default=Path.home() / ".cache" / "hpcval-acceptance",
                   help="where Intel MPI's wheels are downloaded (not carried)")
    p.set_defaults(func=prepare)
    q = sub.add_parser("run", help="install from the folder and run the acceptance run")
    q.add_argument("--out", type=Path, required=True, help="results folder")
    q.add_argument("--budget-s", type=float, default=480.0,
                   help="seconds of wall time for the whole run (default 480)")
    q.add_argument("--dry", action="store_true",
                   help="write the plan (steps.json, summary.md) without installing or running")
    q.add_argument("--offline", type=Path, default=OFFLINE, help="the prepared folder")
    q.add_argument("--parts", default=",".join(PARTS),
                   help=f"which parts to run, comma-separated (default {','.join(PARTS)}): "
                   "e.g. verdict alone again when a first run's budget cut it")
    q.add_argument("--python", default=shutil.which("python3") or sys.executable,
                   help="the Python the venv is made from (default python3)")
    q.add_argument("--work", help="scratch folder: checkout and venv (default: a new one "
                   "in $TMPDIR)")
    q.set_defaults(func=run)
    args = ap.parse_args(argv)
    try:
        return int(args.func(args))
    except OSError as err:  # a disk that filled or went read-only under the run
        print(f"acceptance {args.cmd}: {err.filename or '?'}: {err.strerror or err}; what "
              "was written so far is kept; exit 3", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print(f"acceptance {args.cmd}: interrupted; exit 130", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
