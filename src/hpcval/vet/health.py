"""A per-node gate that runs on the node itself: Slurm's ``HealthCheckProgram``.

``hpcval health --site S [--node NAME] [--drain]`` measures the node it runs on,
without Slurm (no allocation, no step: slurmd runs it outside any job, and kills
it after 60 s): the probe (tuning audit, CPU frequency), the triad (hpcval's
``cfdio`` on one rank, sized as a vetting sizes it) and the shared-memory
PingPong (IMB-MPI1, 2 ranks on the node), each ``samples`` times, and, where
the vetting it judges against measured DGEMM (``hpcval vet --dgemm``), 3 DGEMM
multiplies at that vetting's matrix order (where the budget left allows twice
what they took there), within a ``budget`` of seconds. It judges each
figure against two yardsticks:

- the **partition** as the last full vetting of it measured it
  (``var/<site>/vet/*/vet.json``: every node's figure there, the named nodes
  left out): median and double MAD, off when worse by more than the figure's
  practical minimum *and* beyond robust z 3.5 (the vetting's own rules,
  :mod:`hpcval.vet.judge`);
- the node's **own accepted history**: its figure in every stored vetting of
  the partition that did not name it (at least 3), by the same rules.

A figure off against either is the evidence: one line is printed, the exit
code is 1, and with ``--drain`` the node is drained with the evidence as the
reason. A tuning setting that misses the site's expectations is off too.
Exit 0: the node may run jobs; 2: no full vetting of the partition to judge
against, or the node is unknown; 3: a measurement failed or the budget ran
out (the node is not drained for hpcval's own failure).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core import trust
from hpcval.core.errors import EnvironmentFault, InputError, ParseError
from hpcval.parsers.cfdio import parse_cfdio
from hpcval.parsers.imb import parse_imb
from hpcval.vet import measure
from hpcval.vet.judge import FIGURES, JudgeSettings, _fmt, robust_center_scale
from hpcval.vet.probe import MARKER
from hpcval.vet.sitecfg import VetSite

#: Appended to the PATH where missing (a HealthCheckProgram's environment has none).
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

#: The figures the gate measures and judges (latency is shown by a vetting, not judged).
JUDGED = ("triad_bw", "shm_pingpong_bw_1MiB", "cpu_mhz", "dgemm_gflops")

#: What the probe reads of the node besides figures (kept with the samples).
READINGS = ("fingerprint", "fingerprint_unknown", "counters")


@dataclass
class Yardstick:
    """One figure of the node next to one population (the partition, or its history)."""

    against: str  # "partition" or "own history"
    center: float
    scale: float
    count: int
    worse_by: float
    z: float
    off: bool


@dataclass
class HealthVerdict:
    node: str
    ok: bool
    #: figure -> its value and each yardstick
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the full vetting judged against
    reference: str = ""

    def line(self, seconds: float | None = None) -> str:
        took = f" in {seconds:.0f} s" if seconds is not None else ""
        if not self.ok:
            return f"health {self.node}: NO{took}: " + "; ".join(self.evidence)
        shown = []
        for fig, d in self.figures.items():
            spec = FIGURES[fig]
            vs = ", ".join(f"{-y['worse_by'] * 100:+.0f} % vs {y['against']}"
                           for y in d["yardsticks"])
            shown.append(f"{spec.label} {_fmt(d['value'])} {spec.unit} ({vs})")
        return f"health {self.node}: OK{took}: " + "; ".join(shown)


def last_full_vet(results: list[dict[str, Any]], node: str,
                  settings: JudgeSettings, where: str = "var/<site>/vet") -> dict[str, Any]:
    """The latest stored vetting that measured ``node`` among at least
    ``min_nodes`` nodes (a full vetting, not a gate of a few), of those stored
    in ``where``."""
    full = [r for r in results if node in r["verdict"]["nodes"]
            and len(r["verdict"]["nodes"]) >= settings.min_nodes]
    if not full:
        raise InputError(f"no stored vetting of its partition measured {node} among at least "
                         f"{settings.min_nodes} nodes ({len(results)} judged vetting(s) of the "
                         f"partition in {where}): run hpcval vet on the partition first; exit 2")
    return max(full, key=lambda r: r["id"])


def _yardstick(against: str, value: float, population: list[float], fig: str,
               settings: JudgeSettings) -> Yardstick:
    spec = FIGURES[fig]
    center, scale = robust_center_scale(population, settings.scale_floor, spec.better)
    worse = spec.worse(value, center)
    z = worse * abs(center) / scale
    return Yardstick(against, center, scale, len(population), worse, z,
                     worse > settings.effect(spec) and z > settings.z)


def judge_health(node: str, samples: dict[str, list[float]], audit: list[dict[str, Any]],
                 results: list[dict[str, Any]], settings: JudgeSettings,
                 where: str = "var/<site>/vet") -> HealthVerdict:
    """The node's figures against the last full vetting and its own accepted history
    (``results``: the vettings stored in ``where``)."""
    ref = last_full_vet(results, node, settings, where)
    verdict = HealthVerdict(node, True, reference=ref["id"])
    named_ref = set(ref["verdict"].get("named_nodes", []))
    for fig in JUDGED:
        spec = FIGURES[fig]
        got = samples.get(fig) or []
        if fig == "dgemm_gflops" and not got and dgemm_of(ref) is None:
            continue  # a vetting without DGEMM: nothing measured, nothing to judge
        if len(got) < 3:
            verdict.notes.append(f"{spec.label}: {len(got)} sample(s), fewer than 3: not judged")
            continue
        value = spec.of(got)
        entry: dict[str, Any] = {"value": value, "samples": got, "yardsticks": []}
        partition = [figs[fig]["value"] for n, figs in ref["verdict"]["table"].items()
                     if fig in figs and n not in named_ref and n != node]
        history = [r["verdict"]["table"][node][fig]["value"] for r in results
                   if node in r["verdict"]["table"] and fig in r["verdict"]["table"][node]
                   and node not in r["verdict"].get("named_nodes", [])]
        for against, pop, least in (("partition", partition, settings.min_nodes - 1),
                                    ("own history", history, 3)):
            if len(pop) < least:
                verdict.notes.append(f"{spec.label}: {len(pop)} value(s) of the {against}, "
                                     f"fewer than {least}: not judged against it")
                continue
            y = _yardstick(against, value, pop, fig, settings)
            entry["yardsticks"].append(asdict(y))
            if y.off:
                verdict.ok = False
                where = (f"the partition median {_fmt(y.center)} {spec.unit} (vet {ref['id']}, "
                         f"{y.count} nodes)" if against == "partition" else
                         f"its own median {_fmt(y.center)} {spec.unit} over {y.count} accepted "
                         "vettings")
                verdict.evidence.append(
                    f"{spec.label} {_fmt(value)} {spec.unit} ({spec.summary} of {len(got)}), "
                    f"{y.worse_by * 100:.0f} % below {where}, robust z {y.z:.1f}")
        verdict.figures[fig] = entry
    bad = [f for f in audit if f.get("status") in ("mismatch", "unknown")]
    if bad:
        verdict.ok = False
        verdict.evidence.append("tuning audit: " + "; ".join(
            f"{f['setting']} found {f.get('found')!r}, expected {f.get('expected')}"
            for f in bad))
    return verdict


def local_env(site: VetSite) -> dict[str, str]:
    """The site's MPI environment for ranks on this node alone: no Slurm PMI (no
    step), no network interface for the launcher (it forks its ranks here),
    shared memory only."""
    env = dict(site.env)
    for key in ("I_MPI_PMI_LIBRARY", "I_MPI_HYDRA_IFACE"):
        env.pop(key, None)
    # slurmd runs its HealthCheckProgram with next to no environment (no /usr/bin
    # on the PATH: the MPI compiler and launcher scripts need dirname, basename)
    path = [d for d in env.get("PATH", "").split(":") if d]
    env["PATH"] = ":".join(path + [d for d in SYSTEM_PATH if d not in path])
    env["I_MPI_HYDRA_BOOTSTRAP"] = "fork"
    env["I_MPI_FABRICS"] = "shm"
    return env


class _Clock:
    def __init__(self, budget: float) -> None:
        self.end = time.monotonic() + budget
        self.budget = budget

    def run(self, cmd: list[str], env: dict[str, str], what: str) -> str:
        left = self.end - time.monotonic()
        if left <= 1:
            raise EnvironmentFault(f"{what}: the budget of {self.budget:.0f} s ran out (a "
                                   "HealthCheckProgram is killed at 60 s); exit 3")
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=left,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise EnvironmentFault(f"{what}: still running when the budget of "
                                   f"{self.budget:.0f} s ran out; exit 3") from None
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise EnvironmentFault(f"{what} failed: {tail[:200]}; exit 3")
        return proc.stdout


def _cfdio(site: VetSite, env: dict[str, str]) -> str:
    """The vetting's ``cfdio`` (built once into ``var/<site>/vet/bin``), under a
    file lock: slurmd starts its HealthCheckProgram on every node at once, and
    nodes that share ``var/`` must not build it over each other."""
    import dataclasses
    import fcntl

    bin_dir = site.var / "vet" / "bin"
    if bin_dir.is_dir() and not os.access(bin_dir, os.W_OK):
        # a store shared read-only: the cfdio a vetting built there, built nowhere else
        return measure.cfdio_binary(dataclasses.replace(site, env=env), bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    with (bin_dir / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return measure.cfdio_binary(dataclasses.replace(site, env=env), bin_dir)


#: DGEMM multiplies the gate takes (after one warm-up): the fewest it judges, so the
#: 60 s a HealthCheckProgram has are not spent on one figure
DGEMM_SAMPLES = 3


def dgemm_of(ref: dict[str, Any]) -> dict[str, str] | None:
    """The DGEMM size (``n``, ``threads``) the vetting ``ref`` measured its
    partition at, and ``seconds``: what one multiply took there (its DGEMM step over
    its multiplies and warm-up); ``None`` where it measured no DGEMM (the gate then
    measures none: nothing to judge it against)."""
    size = dict((ref.get("sizes") or {}).get("dgemm_gflops") or {})
    if not str(size.get("n", "")).isdigit():
        return None
    step = (ref.get("step_seconds") or {}).get("dgemm")
    counts = [len(v) for v in (ref.get("node_samples") or {}).get("dgemm_gflops", {}).values()]
    if step and counts:
        size["seconds"] = f"{float(step) / (max(counts) + 1):.3f}"
    return size


def measure_dgemm(clock: _Clock, env: dict[str, str], size: dict[str, str]) -> list[float]:
    """DGEMM at the vetting's order (and threads, where its nodes shared a machine),
    :data:`DGEMM_SAMPLES` multiplies in one run of :mod:`hpcval.node.dgemm`; none
    (the figure then is not judged, and says so) where the budget left is shorter
    than twice what they took in the vetting."""
    need = 2 * (DGEMM_SAMPLES + 1) * float(size.get("seconds") or 0)
    if clock.end - time.monotonic() < need:
        return []
    env = dict(env)
    if size.get("threads"):
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(size["threads"])
    out = clock.run([sys.executable, "-m", "hpcval.node.dgemm", "--json",
                     f"--samples={DGEMM_SAMPLES}", f"--n={size['n']}"], env, "DGEMM")
    try:
        gflops = json.loads(out.strip().splitlines()[-1])["gflops"]
    except (ValueError, IndexError, KeyError, TypeError):
        raise EnvironmentFault("DGEMM printed no result line; exit 3") from None
    return [float(g) for g in gflops]


def measure_here(site: VetSite, samples: int, budget: float,
                 raw: Path | None = None, dgemm: dict[str, str] | None = None,
                 probe_out: dict[str, Any] | None = None,
                 ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Probe, triad and shared-memory PingPong on this node, ``samples`` times each,
    and DGEMM at the size ``dgemm`` (:func:`dgemm_of`) where given:
    ``{figure: [samples]}`` with the probe's readings of the node beside them
    (:data:`READINGS`: its fingerprint, the keys it could not read, its error
    counters), and the tuning audit; the probe's whole line, with the time it
    was read (``read_at``), into ``probe_out`` when given."""
    clock = _Clock(budget)
    env = local_env(site)
    expect = [f"--expect={site.host_expectations}"] if site.host_expectations else []
    out = clock.run([sys.executable, "-m", "hpcval.vet.probe", f"--samples={samples}",
                     *expect], env, "probe")
    line = next((ln for ln in out.splitlines() if ln.startswith(MARKER)), None)
    if line is None:
        raise EnvironmentFault("probe printed no result line; exit 3")
    probe = json.loads(line[len(MARKER):])
    if probe_out is not None:
        probe_out.clear()
        probe_out.update(probe, read_at=time.time())
    figures: dict[str, Any] = {"cpu_mhz": probe["cpu_mhz"]}
    figures.update({key: probe[key] for key in READINGS if key in probe})
    launcher = shutil.which("mpiexec", path=env.get("PATH"))
    if launcher is None:
        raise EnvironmentFault(f"mpiexec not on the PATH of environment '{site.env_name}'; "
                               "exit 3")
    cfdio = _cfdio(site, env)
    size = measure.triad_size(site, measure.Settings())
    triad = [launcher, "-n", "1", cfdio, "--mode", "triad", "--triad-n",
             str(size.params["triad_n"]), "--reps", str(size.params["reps"])]
    figures["triad_bw"] = []
    found = shutil.which("IMB-MPI1", path=env.get("PATH"))
    if found is None:
        raise EnvironmentFault(f"IMB-MPI1 not on the PATH of environment '{site.env_name}'; "
                               "exit 3")
    trust.check_paths([launcher, found, cfdio], "a program the gate runs")
    # a directory of its own (0700), never a guessable name in a shared /tmp
    work = raw or Path(tempfile.mkdtemp(prefix="hpcval-health-"))
    msglen = measure.write_msglen(work / "msglen.txt", 1)
    # the vetting's shared-memory PingPong: 8 B and 1 MiB, 20 iterations, 2 ranks
    imb = [found, "PingPong", "-msglen", str(msglen), "-iter", "20", "-iter_policy", "off",
           "-mem", "1"]
    figures["shm_pingpong_bw_1MiB"], figures["shm_pingpong_lat_8B"] = [], []
    try:
        for i in range(samples):  # interleaved, as a vetting spreads its samples over time
            text = clock.run(triad, env, f"triad sample {i + 1}")
            try:
                figures["triad_bw"].append(float(parse_cfdio(text, "triad")["triad_MBs"]))
            except (ParseError, KeyError) as err:
                raise EnvironmentFault(f"triad sample {i + 1}: {err}; exit 3") from None
            text = clock.run([launcher, "-n", "2", *imb], env,
                             f"shared-memory PingPong sample {i + 1}")
            source = "shared-memory PingPong"
            try:
                table = parse_imb(text, source).table("PingPong")
            except ParseError as err:
                raise EnvironmentFault(f"{source} sample {i + 1}: {err}; exit 3") from None
            bw, lat = measure.pingpong_samples(table, source)
            figures["shm_pingpong_bw_1MiB"] += bw
            figures["shm_pingpong_lat_8B"] += lat
        if dgemm:
            figures["dgemm_gflops"] = measure_dgemm(clock, env, dgemm)
    finally:
        msglen.unlink(missing_ok=True)
        if raw is None:
            work.rmdir()
    return figures, probe["audit"]


def store(site: VetSite, run_id: str, verdict: HealthVerdict, seconds: float,
          figures: dict[str, Any], base: Path | None = None, line: str | None = None,
          extra: dict[str, Any] | None = None) -> Path:
    """``<base>/<id>-<node>.json`` (``base``: ``var/<site>/health/``): never overwritten.
    ``line`` is the line printed (default: the verdict's); ``extra`` adds keys (the
    gate's confirmation)."""
    base = base or site.var / "health"
    base.mkdir(parents=True, exist_ok=True)
    path = base / f"{run_id}-{verdict.node}.json"
    with path.open("x") as fh:
        json.dump({"id": run_id, "site": site.name, "partition": site.slurm_partition,
                   "seconds": seconds, "samples": figures, "verdict": asdict(verdict),
                   **(extra or {}), "line": line or verdict.line(seconds)}, fh, indent=1)
    return path
