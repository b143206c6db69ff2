"""The measurements of a vetting, as srun steps inside one allocation."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import EnvironmentFault, ParseError
from hpcval.core.paths import project_root
from hpcval.node import sizing
from hpcval.parsers.cfdio import parse_cfdio
from hpcval.parsers.imb import parse_imb
from hpcval.vet.probe import MARKER
from hpcval.vet.schedule import Pair
from hpcval.vet.sitecfg import VetSite
from hpcval.vet.slurm import Allocation, StepResult, run_steps

Progress = Callable[[str], None]


@dataclass
class Settings:
    samples: int = 5
    #: PingPong iterations per sample (1 MiB; a sample takes 2 x iter x size / rate)
    iterations: int = 4
    #: doubles per triad array; ``None``: sized for the partition's nodes
    #: (:func:`triad_size`)
    triad_n: int | None = None
    step_timeout: float = 120.0


@dataclass
class NodeSamples:
    """Per-node samples: figure -> node -> samples, and the audit per node."""

    figures: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    audit: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    #: measurement -> the size it ran at and why (:mod:`hpcval.node.sizing`)
    sizes: dict[str, dict[str, str]] = field(default_factory=dict)


def triad_size(site: VetSite, settings: Settings) -> sizing.Size:
    """The per-node triad's size: one rank whose three arrays are each at least
    4x the node's last-level cache (:func:`hpcval.node.sizing.triad`, budget quick), so
    the triad of every node reads its memory, not its caches; ``triad_n`` in the
    settings overrides it."""
    if settings.triad_n is not None:
        n = settings.triad_n
        return sizing.Size({"triad_n": n, "reps": 3}, f"{n:,} doubles per array, best of 3",
                           "set by the caller", "quick", 0, 24 * n)
    return sizing.triad(site.node, 1, "quick")


def cfdio_binary(site: VetSite, build_dir: Path) -> str:
    """A ``cfdio`` on the environment's PATH, else proxies/cfdio built with its mpicc."""
    found = shutil.which("cfdio", path=site.env.get("PATH"))
    if found:
        return found
    src = project_root() / "proxies" / "cfdio" / "cfdio.c"
    out = build_dir / "cfdio"
    if out.exists() and out.stat().st_mtime >= src.stat().st_mtime:
        return str(out)
    build_dir.mkdir(parents=True, exist_ok=True)
    cc = shutil.which(site.cc, path=site.env.get("PATH")) or site.cc
    env = dict(site.env)
    env.setdefault("I_MPI_ROOT", str(Path(cc).resolve().parent.parent))
    proc = subprocess.run([cc, "-O3", "-std=c99", "-o", str(out), str(src)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise EnvironmentFault(f"building {src} with {cc} failed: {proc.stderr.strip()[:300]} "
                               "(exit 3)")
    return str(out)


def _imb(site: VetSite, msglen: Path, iterations: int) -> list[str]:
    imb = shutil.which("IMB-MPI1", path=site.env.get("PATH"))
    if imb is None:
        raise EnvironmentFault(f"IMB-MPI1 not on the PATH of environment '{site.env_name}' "
                               "(install Intel MPI's benchmarks: make setup); exit 3")
    return [imb, "PingPong", "-msglen", str(msglen), "-iter", str(iterations),
            "-iter_policy", "off", "-mem", "1"]


def write_msglen(path: Path, samples: int) -> Path:
    """IMB message lengths: 8 B and 1 MiB, each ``samples`` times (one row per sample)."""
    path.write_text("".join("8\n" for _ in range(samples))
                    + "".join("1048576\n" for _ in range(samples)))
    return path


def pingpong_samples(text: str, source: str) -> tuple[list[float], list[float]]:
    """(1 MiB bandwidths in MB/s, 8 B one-way latencies in us) of one IMB run."""
    table = parse_imb(text, source).table("PingPong")
    bw = [r["mbytes_per_sec"] for r in table.rows if int(r.get("bytes", -1)) == 1048576]
    lat = [r["t_usec"] for r in table.rows if int(r.get("bytes", -1)) == 8]
    if not bw:
        raise ParseError(f"{source}: no 1 MiB PingPong rows")
    return bw, lat


def _mpi(site: VetSite) -> str | None:
    return "pmi2" if "pmi2" in site.env.get("I_MPI_PMI_LIBRARY", "") else None


def _save(raw: Path, name: str, res: StepResult) -> None:
    (raw / f"{name}.out").write_text(res.stdout)
    if res.stderr.strip():
        (raw / f"{name}.err").write_text(res.stderr)


def _why(res: StepResult) -> str:
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {res.returncode}"


def node_phase(alloc: Allocation, site: VetSite, nodes: Sequence[str], settings: Settings,
               workdir: Path, progress: Progress) -> NodeSamples:
    """Probe, triad and shared-memory PingPong on every node at once."""
    raw = workdir / "raw"
    out = NodeSamples()
    mpi = _mpi(site)
    expect = [f"--expect={site.host_expectations}"] if site.host_expectations else []
    probe = [sys.executable, "-m", "hpcval.vet.probe", f"--samples={settings.samples}", *expect]
    t0 = time.monotonic()
    res = run_steps({n: alloc.step([n], 1, probe) for n in nodes}, site.env,
                    settings.step_timeout)
    mhz: dict[str, list[float]] = {}
    for n, r in res.items():
        _save(raw, f"probe-{n}", r)
        line = next((ln for ln in r.stdout.splitlines() if ln.startswith(MARKER)), None)
        if r.returncode != 0 or line is None:
            out.failures.append(f"{n}: probe failed: {_why(r)}")
            continue
        data = json.loads(line[len(MARKER):])
        mhz[str(n)] = data["cpu_mhz"]
        out.audit[str(n)] = data["audit"]
    out.figures["cpu_mhz"] = mhz
    progress(f"probe (tuning audit, CPU frequency) on {len(nodes)} nodes: "
             f"{time.monotonic() - t0:.1f} s")

    cfdio = cfdio_binary(site, site.var / "vet" / "bin")
    triad: dict[str, list[float]] = {n: [] for n in nodes}
    t0 = time.monotonic()
    size = triad_size(site, settings)
    out.sizes["triad_bw"] = {"size": size.summary, "reason": size.reason}
    progress(f"triad size: {size.summary} ({size.reason})")
    cmd = [cfdio, "--mode", "triad", "--triad-n", str(size.params["triad_n"]),
           "--reps", str(size.params["reps"])]
    for i in range(settings.samples):
        res = run_steps({n: alloc.step([n], 1, cmd, mpi) for n in nodes}, site.env,
                        settings.step_timeout)
        for n, r in res.items():
            _save(raw, f"triad-{n}-{i}", r)
            try:
                triad[str(n)].append(float(parse_cfdio(r.stdout, f"triad {n}")["triad_MBs"]))
            except (ParseError, KeyError) as err:
                out.failures.append(f"{n}: triad sample {i + 1} failed: {err}; {_why(r)}")
    out.figures["triad_bw"] = triad
    progress(f"triad on {len(nodes)} nodes at once, {settings.samples} samples: "
             f"{time.monotonic() - t0:.1f} s")

    # one sample per step, the steps spread over time like the triad's: a sample
    # that met other work on the machine is one of five, not all five
    msglen = write_msglen(workdir / "msglen-shm.txt", 1)
    cmd = _imb(site, msglen, 20)
    t0 = time.monotonic()
    bw: dict[str, list[float]] = {n: [] for n in nodes}
    lat: dict[str, list[float]] = {n: [] for n in nodes}
    for i in range(settings.samples):
        res = run_steps({n: alloc.step([n], 2, cmd, mpi) for n in nodes}, site.env,
                        settings.step_timeout)
        for n, r in res.items():
            _save(raw, f"shm-pingpong-{n}-{i}", r)
            try:
                b, la = pingpong_samples(r.stdout, f"shm PingPong {n}")
                bw[str(n)] += b
                lat[str(n)] += la
            except ParseError as err:
                out.failures.append(f"{n}: shared-memory PingPong sample {i + 1} failed: "
                                    f"{err}; {_why(r)}")
    out.figures["shm_pingpong_bw_1MiB"] = bw
    out.figures["shm_pingpong_lat_8B"] = lat
    progress(f"shared-memory PingPong on {len(nodes)} nodes at once, {settings.samples} "
             "samples: "
             f"{time.monotonic() - t0:.1f} s")
    return out


def pair_measure(alloc: Allocation, site: VetSite, settings: Settings, workdir: Path,
                 progress: Progress, total_rounds: Callable[[], int],
                 latency: dict[Pair, list[float]],
                 ) -> Callable[[int, list[Pair]], dict[Pair, list[float]]]:
    """measure(round, pairs): one IMB PingPong step per pair, all pairs at once."""
    raw = workdir / "raw"
    msglen = write_msglen(workdir / "msglen-pair.txt", settings.samples)
    cmd = _imb(site, msglen, settings.iterations)
    mpi = _mpi(site)

    def measure(index: int, pairs: list[Pair]) -> dict[Pair, list[float]]:
        t0 = time.monotonic()
        res = run_steps({p: alloc.step(list(p), 2, cmd, mpi) for p in pairs}, site.env,
                        settings.step_timeout)
        got: dict[Pair, list[float]] = {}
        shown = []
        for p, r in res.items():
            a, b = p  # type: ignore[misc]
            _save(raw, f"round{index + 1}-{a}-{b}", r)
            try:
                got[p], latency[p] = pingpong_samples(r.stdout, f"PingPong {a}<->{b}")  # type: ignore[index]
                shown.append(f"{a}<->{b} {sorted(got[p])[len(got[p]) // 2]:.0f}")  # type: ignore[index]
            except ParseError as err:
                shown.append(f"{a}<->{b} FAILED ({err}; {_why(r)})")
        progress(f"round {index + 1}/{total_rounds()}: {len(pairs)} pair(s) at once, "
                 f"{time.monotonic() - t0:.1f} s: " + ", ".join(shown) + " MB/s")
        return got  # type: ignore[return-value]

    return measure


def gpu_samples_of(outputs: dict[str, str], failures: list[str]
                   ) -> dict[str, dict[str, dict[str, list[float]]]]:
    """``{figure: {node: {gpu: samples}}}`` from each node's GPU probe output
    (:mod:`hpcval.vet.gpu_probe`); a node without its line, and every
    measurement a probe skipped, is added to *failures*."""
    from hpcval.vet.gpu_probe import MARKER as GPU_MARKER

    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for node, text in outputs.items():
        line = next((ln for ln in text.splitlines() if ln.startswith(GPU_MARKER)), None)
        if line is None:
            failures.append(f"{node}: GPU probe printed no result line")
            continue
        data = json.loads(line[len(GPU_MARKER):])
        failures += [f"{node}: {why}" for why in data.get("skipped", [])]
        for figure, per_gpu in data.get("figures", {}).items():
            out.setdefault(figure, {})[node] = per_gpu
    return out


def gpu_phase(alloc: Allocation, site: VetSite, nodes: Sequence[str], settings: Settings,
              workdir: Path, progress: Progress) -> tuple[dict[str, Any], list[str]]:
    """Every GPU of every node at once (one probe step per node)."""
    raw = workdir / "raw"
    probe = [sys.executable, "-m", "hpcval.vet.gpu_probe", f"--samples={settings.samples}"]
    t0 = time.monotonic()
    res = run_steps({n: alloc.step([n], 1, probe) for n in nodes}, site.env,
                    10 * settings.step_timeout)
    failures: list[str] = []
    outputs = {}
    for n, r in res.items():
        _save(raw, f"gpu-probe-{n}", r)
        if r.returncode != 0:
            failures.append(f"{n}: GPU probe failed: {_why(r)}")
            continue
        outputs[str(n)] = r.stdout
    samples = gpu_samples_of(outputs, failures)
    progress(f"GPU probe (BabelStream, gpubench) on {len(nodes)} nodes at once: "
             f"{time.monotonic() - t0:.1f} s")
    return samples, failures
