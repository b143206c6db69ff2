"""The measurements of a vetting: a constant number of srun steps in one allocation.

Per node: one step for the probe (audit, CPU frequency, memory), one for the
triad (every node's task runs its samples), one for the shared-memory PingPong
(IMB -multi over two ranks per node). Per round of pairs: one step, an MPI world
over the round's nodes whose IMB -multi groups are the round's pairs. A node
or pair whose measurement failed or was lost is recorded with the cause
(:attr:`NodeSamples.unmeasured`, ``causes``), never passed.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hpcval.core.errors import EnvironmentFault, ParseError
from hpcval.core.paths import project_root
from hpcval.node import sizing
from hpcval.parsers.imb import ImbResult, ImbTable, parse_imb
from hpcval.vet.probe import MARKER
from hpcval.vet.schedule import Pair
from hpcval.vet.sitecfg import VetSite
from hpcval.vet.slurm import (
    DEAD_STATES,
    Allocation,
    StepResult,
    by_task,
    first_node_error,
    nodes_info,
)

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
    #: measure DGEMM on every node too (``dgemm_gflops``)
    dgemm: bool = False
    #: DGEMM's matrix order; ``None``: sized for the partition's nodes (:func:`dgemm_size`)
    dgemm_n: int | None = None


@dataclass
class NodeSamples:
    """Per-node samples: figure -> node -> samples, and the audit per node."""

    figures: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    audit: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    #: measurement -> the size it ran at and why (:mod:`hpcval.node.sizing`)
    sizes: dict[str, dict[str, str]] = field(default_factory=dict)
    #: node -> what of it was not measured and why (a lost sample counts)
    unmeasured: dict[str, list[str]] = field(default_factory=dict)
    #: node -> srun's first line about it, for a node a step lost (left out after)
    lost: dict[str, str] = field(default_factory=dict)
    #: steps measured again without a lost node
    again_used: int = 0
    #: the triad step's command (:mod:`hpcval.vet.confirm` runs it again)
    triad_cmd: list[str] = field(default_factory=list)
    #: node -> its fingerprint, the keys it could not read, and its error
    #: counters with the time read (the probe's, :mod:`hpcval.vet.uniformity`,
    #: :mod:`hpcval.vet.counters`)
    fingerprint: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    fingerprint_unknown: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    counters: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the DGEMM step's command and environment (:mod:`hpcval.vet.confirm` runs it again)
    dgemm_cmd: list[str] = field(default_factory=list)
    dgemm_env: dict[str, str] = field(default_factory=dict)
    #: memory a process may count on per node and why; most nodes sharing one machine
    per_node: int | None = None
    memory_where: str = ""
    shared_by: int = 1


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
    """IMB's multiple mode: ranks 0-1, 2-3, ... run PingPong at the same time, one
    table row per group, message size and sample."""
    imb = shutil.which("IMB-MPI1", path=site.env.get("PATH"))
    if imb is None:
        raise EnvironmentFault(f"IMB-MPI1 not on the PATH of environment '{site.env_name}' "
                               "(install Intel MPI's benchmarks: make setup); exit 3")
    return [imb, "-multi", "1", "PingPong", "-msglen", str(msglen), "-iter", str(iterations),
            "-iter_policy", "off", "-mem", "1"]


def write_msglen(path: Path, samples: int) -> Path:
    """IMB message lengths: 8 B and 1 MiB, each ``samples`` times (one row per sample)."""
    path.write_text("".join("8\n" for _ in range(samples))
                    + "".join("1048576\n" for _ in range(samples)))
    return path


def pingpong_samples(table: ImbTable, source: str) -> tuple[list[float], list[float]]:
    """(1 MiB bandwidths in MB/s, 8 B one-way latencies in us) of one PingPong table."""
    bw = [r["mbytes_per_sec"] for r in table.rows if int(r.get("bytes", -1)) == 1048576]
    lat = [r["t_usec"] for r in table.rows if int(r.get("bytes", -1)) == 8]
    if not bw:
        raise ParseError(f"{source}: no 1 MiB PingPong rows")
    return bw, lat


def _misplaced(hosts: dict[int, str], planned: Sequence[str]) -> set[str]:
    """Planned nodes whose ranks did not run where planned, from Intel MPI's
    placement (rank -> host name). Where the host names are the Slurm node names
    (short names compared) they must match; where a site names its hosts
    otherwise, every node must map to one host and every host to one node."""
    names = set(planned)
    short = {r: h.split(".")[0] for r, h in hosts.items()}
    if any(h in names for h in short.values()):
        return {n for r, n in enumerate(planned) if r in short and short[r] != n}
    bad: set[str] = set()
    host_of: dict[str, str] = {}
    node_of: dict[str, str] = {}
    for r, n in enumerate(planned):
        if r in short and (host_of.setdefault(n, short[r]) != short[r]
                           or node_of.setdefault(short[r], n) != n):
            bad.add(n)
    return bad


def _multi_table(result: ImbResult, groups: int, source: str) -> ImbTable:
    """The per-group PingPong table of one ``-multi 1`` world: ``Multi-PingPong``,
    or, for a world of one group (2 ranks: a follow-up round of a single pair),
    the plain ``PingPong`` table IMB prints then, with its ``Group`` column
    (tests/data/vet/steps/pair-2ranks-multi1.out)."""
    names = {t.benchmark for t in result.tables}
    if "Multi-PingPong" in names or groups > 1:
        return result.table("Multi-PingPong")
    table = result.table("PingPong")
    if "group" not in table.columns:
        raise ParseError(f"{source}: a PingPong table without a Group column (columns: "
                         f"{', '.join(table.columns)}): IMB-MPI1 ran without -multi 1")
    return table


def multi_pingpong(text: str, groups: Sequence[tuple[str, str]], source: str,
                   ) -> tuple[dict[int, tuple[list[float], list[float]]], dict[int, str]]:
    """Each group's samples of one ``IMB-MPI1 -multi 1 PingPong`` over ranks placed as
    ``groups`` (group g = ranks 2g, 2g+1 on nodes ``groups[g]``): (group -> samples,
    group -> why it has none). Where Intel MPI printed its placement
    (``I_MPI_DEBUG=4``), a group whose ranks ran elsewhere than planned is refused."""
    result = parse_imb(text, source)
    tables = _multi_table(result, len(groups), source).group_tables()
    planned = [n for g in groups for n in g]
    misplaced = _misplaced(result.hosts, planned)
    got: dict[int, tuple[list[float], list[float]]] = {}
    lost: dict[int, str] = {}
    for g, want in enumerate(groups):
        if set(want) & misplaced:
            ran = tuple(result.hosts.get(r, "?") for r in (2 * g, 2 * g + 1))
            lost[g] = f"ranks {2 * g}-{2 * g + 1} ran on {'+'.join(ran)}, not {'+'.join(want)}"
            continue
        if g not in tables:
            lost[g] = "IMB printed no row for its group"
            continue
        try:
            got[g] = pingpong_samples(tables[g], f"{source} group {g}")
        except ParseError as err:
            lost[g] = str(err)
    if not result.finished:
        for g in list(got):
            lost[g] = "IMB output ends before MPI_Finalize (the run crashed or was killed)"
            del got[g]
    return got, lost


def _mpi(site: VetSite) -> str | None:
    return "pmi2" if "pmi2" in site.env.get("I_MPI_PMI_LIBRARY", "") else None


def _save(raw: Path, name: str, res: StepResult) -> None:
    (raw / f"{name}.out").write_text(res.stdout)
    if res.stderr.strip():
        (raw / f"{name}.err").write_text(res.stderr)


def _why(res: StepResult) -> str:
    """Why a step failed: Slurm's word that it created no step, else srun's
    last line (a line naming the node that failed is taken before it:
    :func:`lost_in_step`)."""
    if not res.created:
        return f"Slurm created no step: {res.why_refused()}"
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()
             and "MPI startup()" not in ln]
    killed = " (killed after the step's time limit)" if "step killed after" in res.stderr else ""
    return (lines[-1][:300] if lines else f"srun exit {res.returncode}") + killed


def _marker_json(lines: Sequence[str]) -> dict[str, Any] | None:
    """The JSON after :data:`MARKER` in one task's lines; srun cuts a long line into
    several labelled ones, so the pieces that follow are joined until it parses."""
    for i, line in enumerate(lines):
        if not line.startswith(MARKER):
            continue
        text = line[len(MARKER):]
        for nxt in [*lines[i + 1:], None]:
            try:
                data = json.loads(text)
                return data if isinstance(data, dict) else None
            except ValueError:
                if nxt is None:
                    return None
                text += nxt
    return None


def _task_lines(res: StepResult, hosts: Sequence[str]) -> dict[str, dict[str, Any]]:
    """host -> its task's result (``srun --label``: task i ran on ``hosts[i]``)."""
    out: dict[str, dict[str, Any]] = {}
    for task, lines in by_task(res.stdout).items():
        data = _marker_json(lines)
        if data is not None and task < len(hosts):
            out[hosts[task]] = data
    return out


def _task_cause(res: StepResult, node: str, task: int) -> str:
    """Why task ``task`` (on ``node``) printed no result: srun's line about it, else
    the step's."""
    for line in res.stderr.splitlines():
        if node in line or f"task {task}:" in line or f"task {task} " in line:
            return line.strip()[:300]
    return _why(res)


def memory_per_node(probes: dict[str, dict[str, Any]]) -> tuple[int | None, str]:
    """The memory a measurement process may count on per node: the least over all
    machines of ``MemAvailable`` divided by the nodes sharing that machine (the
    same kernel boot id: the lab's nodes share one machine), and a line saying so."""
    hosts: dict[str, list[str]] = {}
    avail: dict[str, int] = {}
    for node, data in probes.items():
        key = data.get("boot_id") or node
        hosts.setdefault(key, []).append(node)
        if data.get("mem_available"):
            avail[key] = int(data["mem_available"])
    shares = {k: avail[k] // len(v) for k, v in hosts.items() if k in avail}
    if not shares:
        return None, "memory available unknown (no node reported MemAvailable)"
    worst = min(shares, key=lambda k: shares[k])
    n = len(hosts[worst])
    return shares[worst], (f"{sizing._size(avail[worst])} available on {hosts[worst][0]}'s "
                           f"machine" + (f", shared by {n} nodes" if n > 1 else ""))


def bounded_triad_size(site: VetSite, settings: Settings, per_node: int | None,
                       where: str) -> sizing.Size:
    """:func:`triad_size`, bounded by the memory the triad may use where it runs
    (half of ``per_node``, :data:`hpcval.node.sizing.MEMORY_SHARE`); a size past it is
    refused (:class:`hpcval.node.sizing.SizingError`, exit 2) with the sizes."""
    if per_node is None:
        return triad_size(site, settings)
    allowed = int(per_node * sizing.MEMORY_SHARE)
    if settings.triad_n is None and site.node.llc_bytes:
        try:
            return sizing.triad(replace(site.node, mem_bytes=per_node), 1, "quick")
        except sizing.SizingError as err:
            raise sizing.SizingError(
                f"per-node triad: {err} ({where}: {sizing._size(per_node)} per node); "
                f"give --triad-n at most {allowed // 24:,} (below the cache rule: it then "
                "measures caches as well as memory), or vet fewer nodes per machine; "
                "exit 2") from None
    size = triad_size(site, settings)
    if size.footprint_bytes > allowed:
        raise sizing.SizingError(
            f"per-node triad: {size.summary}: 3 arrays of {sizing._size(size.footprint_bytes / 3)}"
            f" = {sizing._size(size.footprint_bytes)} exceed {sizing.MEMORY_SHARE:.0%} of the "
            f"{sizing._size(per_node)} per node ({where}); give --triad-n at most "
            f"{allowed // 24:,}; exit 2")
    return size


def sharing(probes: dict[str, dict[str, Any]]) -> int:
    """The most nodes that share one machine (the same kernel boot id)."""
    count: dict[str, int] = {}
    for node, data in probes.items():
        key = data.get("boot_id") or node
        count[key] = count.get(key, 0) + 1
    return max(count.values(), default=1)


def node_phase(alloc: Allocation, site: VetSite, nodes: Sequence[str], settings: Settings,
               workdir: Path, progress: Progress, again: int = 0) -> NodeSamples:
    """Probe, triad and shared-memory PingPong on every node at once: three srun
    steps whatever the number of nodes, and, where a node lost in the shared-memory
    PingPong's MPI world ended it for all, that step once more without it (at most
    ``again`` times: :attr:`NodeSamples.again_used`)."""
    raw = workdir / "raw"
    out = NodeSamples()
    mpi = _mpi(site)
    hosts = list(nodes)

    def lost(node: str, what: str, cause: str) -> None:
        # listed once, as unmeasured (not again as a failure)
        out.unmeasured.setdefault(node, []).append(f"{what}: {cause}")

    expect = [f"--expect={site.host_expectations}"] if site.host_expectations else []
    probe = [sys.executable, "-m", "hpcval.vet.probe", f"--samples={settings.samples}", *expect]
    t0 = time.monotonic()
    res = alloc.run("probe", hosts, probe, site.env, settings.step_timeout, workdir,
                    independent=True)
    _save(raw, "probe", res)
    probes = _task_lines(res, hosts)
    mhz: dict[str, list[float]] = {}
    for i, n in enumerate(hosts):
        if n not in probes:
            lost(n, "probe", _task_cause(res, n, i))
            continue
        mhz[n] = probes[n]["cpu_mhz"]
        out.audit[n] = probes[n]["audit"]
        take_identity(out, n, probes[n], time.time())
    out.figures["cpu_mhz"] = mhz
    progress(f"probe (tuning audit, CPU frequency, memory) on {len(nodes)} nodes, one step: "
             f"{time.monotonic() - t0:.1f} s")

    per_node, where = memory_per_node(probes)
    out.per_node, out.memory_where, out.shared_by = per_node, where, sharing(probes)
    size = bounded_triad_size(site, settings, per_node, where)
    out.sizes["triad_bw"] = {"size": size.summary, "reason": size.reason,
                             "memory": where}
    progress(f"triad size: {size.summary} ({size.reason}; {where})")
    cfdio = cfdio_binary(site, site.var / "vet" / "bin")
    cmd = [sys.executable, "-m", "hpcval.vet.probe", f"--samples={settings.samples}",
           f"--triad={cfdio}", f"--triad-n={size.params['triad_n']}",
           f"--reps={size.params['reps']}"]
    out.triad_cmd = cmd
    t0 = time.monotonic()
    res = alloc.run("triad", hosts, cmd, site.env, settings.step_timeout * settings.samples,
                    workdir, independent=True)
    _save(raw, "triad", res)
    lines = _task_lines(res, hosts)
    triad: dict[str, list[float]] = {}
    for i, n in enumerate(hosts):
        if n not in lines:
            lost(n, "triad", _task_cause(res, n, i))
            continue
        for err in lines[n]["errors"]:
            lost(n, "triad", err)
        if not lines[n]["errors"]:
            triad[n] = lines[n]["triad_bw"]
    out.figures["triad_bw"] = triad
    progress(f"triad on {len(nodes)} nodes at once, {settings.samples} samples each, one "
             f"step: {time.monotonic() - t0:.1f} s")

    msglen = write_msglen(workdir / "msglen-shm.txt", settings.samples)
    cmd = _imb(site, msglen, 20)
    t0 = time.monotonic()
    bw: dict[str, list[float]] = {}
    lat: dict[str, list[float]] = {}
    todo = list(hosts)
    while todo:
        # one MPI world: a node lost in it ends it for all; measured again without it
        key = "shm-pingpong" + (f"-again{out.again_used}" if todo != hosts else "")
        ranks = [h for n in todo for h in (n, n)]
        res = alloc.run(key, ranks, cmd, {**site.env, "I_MPI_DEBUG": "4"},
                        settings.step_timeout, workdir, mpi)
        _save(raw, key, res)
        try:
            got, why = multi_pingpong(res.stdout, [(n, n) for n in todo],
                                      "shared-memory PingPong")
        except ParseError as err:
            got, why = {}, {g: f"{err}; {_why(res)}" for g in range(len(todo))}
        failed = [n for g, n in enumerate(todo) if g not in got]
        for g, n in enumerate(todo):
            if g in got:
                bw[n], lat[n] = got[g]
        gone = lost_in_step(res, ranks) if failed else {}
        for n, line in gone.items():
            out.lost.setdefault(n, f"shared-memory PingPong: {line}")
        retry = [n for n in failed if n not in gone]
        if gone and retry and out.again_used < again:
            out.again_used += 1
            progress(f"shared-memory PingPong lost {', '.join(gone)}: measured again on "
                     f"the {len(retry)} other node(s)")
            todo = retry
            continue
        for g, n in enumerate(todo):
            if n in failed:
                lost(n, "shared-memory PingPong", gone.get(n) or why.get(g, _why(res)))
        break
    out.figures["shm_pingpong_bw_1MiB"] = bw
    out.figures["shm_pingpong_lat_8B"] = lat
    progress(f"shared-memory PingPong on {len(nodes)} nodes at once (IMB -multi, "
             f"{settings.samples} samples), one step: {time.monotonic() - t0:.1f} s")
    return out


def take_identity(out: NodeSamples, node: str, probe: dict[str, Any], when: float) -> None:
    """The fingerprint and counters of one probe line, where it has them."""
    if isinstance(probe.get("fingerprint"), dict):
        out.fingerprint[node] = probe["fingerprint"]
        out.fingerprint_unknown[node] = probe.get("fingerprint_unknown") or {}
    if isinstance(probe.get("counters"), dict):
        out.counters[node] = {"time": when, "values": probe["counters"]}


def lost_in_step(res: StepResult, hosts: Sequence[str]) -> dict[str, str]:
    """The nodes a failed step lost, with srun's first line about each: the node
    its first error names (``Task launch ... failed on node lab-n9``), and any
    node of the step Slurm now reports down or not responding."""
    out: dict[str, str] = {}
    if not res.created:
        return out  # no step: the job is gone, no node of it is to blame
    first = first_node_error(res.stderr, hosts)
    if first:
        out[first[0]] = first[1]
    try:
        info = nodes_info(list(dict.fromkeys(hosts)))
    except EnvironmentFault:
        return out
    for n, node in info.items():
        if n not in out and any(s in node.state for s in DEAD_STATES):
            out[n] = f"Slurm reports {n} {node.state}" + (f" ({node.reason})" if node.reason
                                                          else "")
    return out


def pair_measure(alloc: Allocation, site: VetSite, settings: Settings, workdir: Path,
                 progress: Progress, total_rounds: Callable[[], int],
                 latency: dict[Pair, list[float]], causes: dict[Pair, str] | None = None,
                 lost: dict[str, str] | None = None,
                 ) -> Callable[[int, list[Pair]], dict[Pair, list[float]]]:
    """measure(round, pairs): one srun step per round, one MPI world over the
    round's nodes with the pairs as IMB -multi's groups (ranks 2g and 2g+1 on the
    ends of pair g), every pair at once. ``causes``: pair -> why it has no samples;
    ``lost``: node -> srun's first line about it, for a node a failed round lost
    (:func:`lost_in_step`; the campaign leaves it out of the rounds after)."""
    raw = workdir / "raw"
    msglen = write_msglen(workdir / "msglen-pair.txt", settings.samples)
    cmd = _imb(site, msglen, settings.iterations)
    mpi = _mpi(site)
    causes = causes if causes is not None else {}
    lost = lost if lost is not None else {}
    runs: dict[int, int] = {}

    def measure(index: int, pairs: list[Pair]) -> dict[Pair, list[float]]:
        t0 = time.monotonic()
        hosts = [h for p in pairs for h in p]
        # a round measured again (after a lost node) keeps the first one's output
        runs[index] = runs.get(index, 0) + 1
        key = f"round{index + 1}" + (f"-again{runs[index] - 1}" if runs[index] > 1 else "")
        res = alloc.run(key, hosts, cmd, {**site.env, "I_MPI_DEBUG": "4"},
                        settings.step_timeout, workdir, mpi)
        _save(raw, key, res)
        try:
            got_g, why = multi_pingpong(res.stdout, [tuple(p) for p in pairs],  # type: ignore[misc]
                                        f"PingPong round {index + 1}")
        except ParseError as err:
            got_g, why = {}, {g: f"{err}; {_why(res)}" for g in range(len(pairs))}
        got: dict[Pair, list[float]] = {}
        failed = []
        gone = lost_in_step(res, hosts) if len(got_g) < len(pairs) else {}
        for n, line in gone.items():
            lost.setdefault(n, f"round {index + 1}: {line}")
        for g, p in enumerate(pairs):
            if g in got_g:
                got[p], latency[p] = got_g[g]
            else:
                ends = [n for n in p if n in gone]
                causes[p] = (f"round {index + 1}: {gone[ends[0]]}" if ends else
                             f"round {index + 1}: {why.get(g, _why(res))}"
                             + (f" (the world ended with {', '.join(gone)}: "
                                f"{next(iter(gone.values()))})" if gone else ""))
                failed.append(f"{p[0]}<->{p[1]}")
        meds = sorted(statistics.median(v) for v in got.values())
        shown = (f"pair medians {meds[0]:.0f}-{meds[-1]:.0f} MB/s" if meds else "no pair")
        again = f" (again, {runs[index] - 1})" if runs[index] > 1 else ""
        progress(f"round {index + 1}/{total_rounds()}{again}: {len(pairs)} pair(s) at once, "
                 f"one step, {time.monotonic() - t0:.1f} s: {shown}"
                 + (f"; FAILED {len(failed)}: {', '.join(failed[:8])}"
                    f"{' ...' if len(failed) > 8 else ''} ({_why(res)})" if failed else "")
                 + "".join(f"; LOST {n}: {line}" for n, line in gone.items()))
        return got

    return measure
