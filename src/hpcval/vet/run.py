"""``hpcval vet`` and ``hpcval vet --gate``: measure, judge, store, act when asked."""

from __future__ import annotations

import getpass
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hpcval.core.errors import InputError, StoreError
from hpcval.core.runid import new_run_id
from hpcval.vet import (
    campaign,
    coded,
    confirm,
    counters,
    dgemmstep,
    gpu_measure,
    measure,
    report,
    stored,
)
from hpcval.vet import rules as vrules
from hpcval.vet import slurm as vslurm
from hpcval.vet.judge import (
    FIGURES,
    INFORMATIONAL,
    PAIR_BW,
    JudgeSettings,
    Verdict,
    judge_audit,
    judge_node_figure,
    judge_references,
    median,
)
from hpcval.vet.planning import Options, check_plan, make_plan
from hpcval.vet.schedule import Pair
from hpcval.vet.sitecfg import VetSite

Progress = Callable[[str], None]

#: exit code of a vetting that could not measure everything it planned
#: (docs/vet.md): a node or pair is ``unmeasured``, named with the cause
EXIT_INCOMPLETE = 4


def store_dir(site: VetSite, vet_id: str) -> Path:
    path = site.var / "vet" / vet_id
    try:
        path.mkdir(parents=True, exist_ok=False)
        (path / "raw").mkdir()
    except FileExistsError:
        raise StoreError(f"{path} exists: a vetting result is never overwritten (exit 3)") from None
    except OSError as err:
        raise StoreError(f"{path}: cannot create the vetting directory: {err} (exit 3)") from None
    return path


def _remove_empty(workdir: Path) -> None:
    """Remove a vetting's directory that holds nothing yet (its empty ``raw/``)."""
    for path in (workdir / "raw", workdir):
        try:
            path.rmdir()
        except OSError:
            return  # not empty (or gone): kept as it is


def _cpu_busy() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    vals = [int(x) for x in fields]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return (sum(vals[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def select_nodes(partition: str, nodes_expr: str | None) -> list[str]:
    members = vslurm.partition_nodes(partition)
    if not nodes_expr:
        return members
    wanted = vslurm.expand_hostlist(nodes_expr)
    stray = [n for n in wanted if n not in members]
    if stray:
        raise InputError(f"--nodes: {', '.join(stray)} not in partition '{partition}' "
                         f"(its nodes: {', '.join(members)}); exit 2")
    return wanted


def measure_and_judge(site: VetSite, nodes: Sequence[str], opts: Options, workdir: Path,
                      progress: Progress, vet_id: str,
                      announce: Progress | None = None) -> dict[str, Any]:
    """Everything of one vetting inside one allocation; the result as a JSON-ready dict.

    The plan is printed (``announce``, else ``progress``) before anything runs
    and refused if it needs more steps than the cluster's ``MaxStepCount``."""
    try:  # a bad rules file or stored vetting: exit 2 before anything runs
        rules = vrules.load(site.dir)
        previous = counters.previous_readings(stored_results(site), list(nodes),
                                              site.var / "health")
    except InputError:
        _remove_empty(workdir)
        raise
    the_plan = make_plan(site, nodes, opts)
    (announce or progress)(the_plan.text())
    try:
        check_plan(the_plan, vslurm.max_step_count())
    except InputError:
        _remove_empty(workdir)  # nothing ran: no empty result left behind
        raise
    topo = {n: s for n, s in vslurm.topology().items() if n in nodes}
    t0, cpu0 = time.monotonic(), _cpu_busy()
    load0 = os.getloadavg()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    latency: dict[Pair, list[float]] = {}
    causes: dict[Pair, str] = {}
    extra = [f"--reservation={opts.reservation}"] if opts.reservation else []
    progress(f"vet {vet_id}: allocating {len(nodes)} node(s) in partition "
             f"{site.slurm_partition} ({','.join(nodes)})")
    with vslurm.Allocation(nodes, site.slurm_partition, opts.minutes, extra) as alloc:
        progress(f"job {alloc.job_id}: per-node figures on all nodes at once")
        node_samples = measure.node_phase(alloc, site, nodes, opts.settings, workdir, progress,
                                          again=opts.again)
        if opts.settings.dgemm:
            dgemmstep.dgemm_step(alloc, site, list(nodes), opts.settings, workdir, node_samples,
                                 progress)
        gpu_samples: dict[str, Any] = {}
        if site.gpus:
            gpu_samples, gpu_failures = gpu_measure.gpu_phase(alloc, site, nodes, opts.settings,
                                                          workdir, progress)
            node_samples.failures += gpu_failures
        rounds_total: list[int] = [0]
        lost = dict(node_samples.lost)  # filled by the rounds as well
        measure_fn = measure.pair_measure(alloc, site, opts.settings, workdir, progress,
                                          lambda: rounds_total[0], latency, causes, lost)
        from hpcval.vet.schedule import plan
        rounds_total[0] = len(plan(nodes, opts.max_rounds))
        progress(f"network: {rounds_total[0]} round(s) of disjoint pairs")
        camp, verdict = campaign.run(nodes, _counting(measure_fn, rounds_total, opts),
                                     opts.judging, max_rounds=opts.max_rounds,
                                     topology=topo or None,
                                     follow_up_rounds=opts.follow_up_rounds, lost=lost,
                                     again=opts.again - node_samples.again_used)
        # per-node suspects measured again beside healthy controls (vet/confirm.py)
        wanted = confirm.suspects(node_samples.figures, nodes, opts.judging)
        confirmed = confirm.measure_again(
            alloc, site, nodes, wanted, node_samples, opts.settings, workdir, progress,
            opts.confirm, set(lost), opts.judging) if opts.confirm else {}
        job_id = alloc.job_id
        steps = alloc.steps
        step_seconds = dict(alloc.step_seconds)
        refused = [{"step": k, "srun": why} for k, why in alloc.refused]
    judge_nodes(verdict, node_samples, opts.judging, site.references(), confirmed)
    if gpu_samples:
        from hpcval.vet.gpu import judge_gpus  # GPU partitions only

        judge_gpus(verdict, gpu_samples, {}, opts.judging)
    coded.judge(verdict, node_samples.fingerprint, node_samples.fingerprint_unknown,
                node_samples.counters, previous, opts.judging, rules)
    wall = time.monotonic() - t0
    return {
        "id": vet_id, "site": site.name, "partition": site.slurm_partition,
        "environ": site.env_name, "job_id": job_id, "started": started,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "wall_seconds": round(wall, 1), "jobs": 1,
        "steps": steps, "step_seconds": step_seconds, "steps_refused": refused,
        "plan": asdict(the_plan) | {"steps": the_plan.steps},
        "rounds": len(camp.rounds), "follow_up_rounds": len(camp.follow_up_rounds),
        "again_rounds": len(camp.again_rounds),
        "schedule": [[list(p) for p in r] for r in camp.rounds + camp.follow_up_rounds],
        "lost": camp.lost,
        "cpu_seconds_machine": round(_cpu_busy() - cpu0, 1),
        "loadavg_before": [round(x, 2) for x in load0],
        "topology": topo, "settings": {"measure": asdict(opts.settings),
                                       "judging": asdict(opts.judging),
                                       "max_rounds": opts.max_rounds},
        "node_samples": node_samples.figures, "audit": node_samples.audit,
        "confirm": confirmed,
        "sizes": node_samples.sizes,
        "gpu_samples": gpu_samples,
        "pair_samples": {f"{a}|{b}": s for (a, b), s in camp.samples.items()},
        "pair_first_samples": {f"{a}|{b}": s for (a, b), s in camp.first.items()},
        "pair_latency_8B": {f"{a}|{b}": s for (a, b), s in latency.items()},
        # a pair that failed is listed once, in "unmeasured", with its cause
        "failures": node_samples.failures,
        "unmeasured": (lost_list := unmeasured(nodes, node_samples, camp, causes)),
        "fingerprints": node_samples.fingerprint,
        "fingerprint_unknown": node_samples.fingerprint_unknown,
        "counters": node_samples.counters,
        "rules": rules.source,
        "verdict": verdict.to_dict(),
        "findings": verdict.findings + coded.lost({"unmeasured": lost_list}),
    }


def unmeasured(nodes: Sequence[str], samples: measure.NodeSamples, camp: campaign.Campaign,
               causes: dict[Pair, str]) -> list[dict[str, str]]:
    """Every node and pair whose measurement failed or was lost, with the cause:
    a node that lost any planned sample, a pair that has no samples, a node none
    of whose pairs was measured."""
    out = [{"kind": "node", "name": n, "cause": "; ".join(
        [f"lost during the vetting: {why}", *samples.unmeasured.get(n, [])])}
        for n, why in camp.lost.items()]
    out += [{"kind": "node", "name": n, "cause": "; ".join(why)}
            for n, why in samples.unmeasured.items() if n not in camp.lost]
    lost = [p for p in dict.fromkeys(camp.failed) if p not in camp.samples]
    out += [{"kind": "pair", "name": f"{a}<->{b}",
             "cause": causes.get((a, b)) or _lost_end(a, b, camp.lost)} for a, b in lost]
    planned = {n for r in camp.rounds for p in r for n in p}
    measured = {n for p in camp.samples for n in p}
    out += [{"kind": "node", "name": n, "cause": "none of its pairs was measured"}
            for n in nodes if n in planned and n not in measured and n not in camp.lost]
    return out


def _lost_end(a: str, b: str, lost: dict[str, str]) -> str:
    ends = [n for n in (a, b) if n in lost]
    return (f"not measured: {ends[0]} was lost ({lost[ends[0]]})" if ends
            else "no samples")


def _counting(fn: campaign.Measure, total: list[int], opts: Options) -> campaign.Measure:
    def wrapped(index: int, pairs: list[Pair]):  # type: ignore[no-untyped-def]
        if index >= total[0]:
            total[0] = index + 1
        return fn(index, pairs)
    return wrapped


def judge_nodes(verdict: Verdict, samples: measure.NodeSamples, settings: JudgeSettings,
                references: dict[str, tuple[float, str]],
                confirmed: dict[str, Any] | None = None) -> None:
    """The per-node figures, the audit and the site's references; with
    ``confirmed`` (``vet.json``'s ``confirm``), a node named on a per-node figure
    stays named only where its second measurement confirms it."""
    for fig in ("triad_bw", "shm_pingpong_bw_1MiB", "shm_pingpong_lat_8B", "cpu_mhz",
                "dgemm_gflops"):
        if samples.figures.get(fig):
            judge_node_figure(samples.figures[fig], FIGURES[fig], settings, verdict,
                              judged=fig not in INFORMATIONAL)
    judge_audit(samples.audit, settings, verdict)
    judge_references(verdict, FIGURES, references, settings)
    # one culprit entry per node and figure
    seen, unique = set(), []
    for c in verdict.culprits:
        key = (c.kind, c.name, c.figure)
        if key not in seen:
            seen.add(key)
            unique.append(c)
    verdict.culprits = unique
    if confirmed:
        confirm.judge_again(verdict, confirmed, settings)


def judge_recorded(result: dict[str, Any], settings: JudgeSettings | None = None,
                   references: dict[str, tuple[float, str]] | None = None) -> Verdict:
    """Judge a stored vetting (``vet.json``) again from its samples alone."""
    settings = settings or JudgeSettings()
    nodes = result["verdict"]["nodes"]
    samples = {tuple(k.split("|")): v for k, v in result["pair_samples"].items()}
    verdict = campaign.network_verdict(nodes, samples, settings,  # type: ignore[arg-type]
                                       result.get("topology") or None)
    judge_nodes(verdict, measure.NodeSamples(figures=result["node_samples"],
                                             audit=result.get("audit", {})),
                settings, references or {}, result.get("confirm"))
    if result.get("gpu_samples") or result.get("gpu_node_samples"):
        from hpcval.vet.gpu import judge_gpus  # GPU partitions only

        judge_gpus(verdict, result.get("gpu_samples", {}), result.get("gpu_node_samples", {}),
                   settings)
    coded.judge(verdict, result.get("fingerprints") or {}, result.get("fingerprint_unknown")
                or {}, {}, {}, settings)
    return verdict


def vet(site: VetSite, nodes_expr: str | None, opts: Options, progress: Progress,
        drain: bool = False, announce: Progress | None = None,
        ) -> tuple[dict[str, Any], dict[str, Path]]:
    nodes = select_nodes(site.slurm_partition, nodes_expr)
    info = vslurm.nodes_info(nodes)
    usable = [n for n in nodes if not _unusable(info.get(n))]
    vet_id = new_run_id()
    workdir = store_dir(site, vet_id)
    if len(usable) < 2:
        raise InputError(f"partition {site.slurm_partition}: {len(usable)} usable node(s) "
                         f"({', '.join(f'{n} {info[n].state}' for n in nodes if n in info)}); "
                         "vetting needs at least 2 (exit 2)")
    result = measure_and_judge(site, usable, opts, workdir, progress, vet_id, announce)
    result["skipped"] = {n: info[n].state if n in info else "unknown to Slurm"
                         for n in nodes if n not in usable}
    if drain:
        result["drained"] = drain_named(result)
    paths = report.write(result, workdir)
    return result, paths


def _unusable(info: vslurm.NodeInfo | None) -> bool:
    return info is None or any(s in info.state for s in ("DOWN", "DRAIN", "FAIL",
                                                          "NOT_RESPONDING", "POWER"))


def drain_reason(result: dict[str, Any], node: str) -> str:
    """One line: the codes, then each finding's evidence once."""
    mine = [c for c in result["verdict"]["culprits"] if node in c["nodes"]]
    codes = sorted({c.get("code") or "" for c in mine} - {""})
    ev = [c["evidence"] for c in mine]
    text = " ".join(" | ".join(dict.fromkeys(ev)).split())  # each once, one line
    return f"hpcval vet [{','.join(codes)}] {result['id']}: " + text


def drainable(result: dict[str, Any]) -> list[str]:
    """The named nodes with an ``off`` finding (``suspect`` and ``unknown`` are
    named, not drained)."""
    off = {n for c in result["verdict"]["culprits"] if c.get("severity", "off") == "off"
           for n in c["nodes"]}
    return [n for n in result["verdict"]["named_nodes"] if n in off]


def drain_named(result: dict[str, Any]) -> list[str]:
    drained = []
    for node in drainable(result):
        vslurm.drain(node, drain_reason(result, node))
        drained.append(node)
    return drained


def stored_results(site: VetSite) -> list[dict[str, Any]]:
    """The judged vettings of the site's partition (:func:`hpcval.vet.stored.load`)."""
    return stored.load(site)


def gate(site: VetSite, node: str, opts: Options, progress: Progress,
         peers_wanted: int = 5, announce: Progress | None = None,
         ) -> tuple[bool, dict[str, Any], dict[str, Path]]:
    """Measure ``node`` with healthy peers; yes (True) if it is not named.

    A drained node takes no jobs, so the gate reserves it with its peers
    (``flags=maint``: nobody else's job lands there), resumes it, measures, and
    deletes the reservation. On yes the node stays resumed (back in service);
    on no it is drained again with the evidence.
    """
    members = vslurm.partition_nodes(site.slurm_partition)
    if node not in members:
        raise InputError(f"--gate {node}: not a node of partition {site.slurm_partition} "
                         f"(nodes: {', '.join(members)}); exit 2")
    info = vslurm.nodes_info(members)
    was = info[node]
    # idle nodes, or nodes whose last job is still completing (right after a vetting)
    peers = [n for n in members if n != node and not _unusable(info.get(n))
             and info[n].state.split("+")[0] in ("IDLE", "COMPLETING")][:peers_wanted]
    vet_id = new_run_id()
    workdir = store_dir(site, vet_id)
    held = "DRAIN" in was.state
    resv = f"hpcval-gate-{vet_id}"
    progress(f"gate {node} ({was.state}{', reason: ' + was.reason if was.reason else ''}) "
             f"with peers {', '.join(peers) or 'none'}")
    vslurm.create_reservation(resv, [node, *peers], opts.minutes, getpass.getuser())
    try:
        if held:
            vslurm.resume(node)
        opts.reservation = resv
        result = measure_and_judge(site, [node, *peers], opts, workdir, progress, vet_id,
                                   announce)
    except BaseException:
        if held:
            vslurm.drain(node, was.reason or f"hpcval gate {vet_id} did not finish")
        raise
    finally:
        vslurm.delete_reservation(resv)
    result["gate"] = node
    named = node in result["verdict"]["named_nodes"]
    stored_note = ""
    if not result["verdict"]["judged"]:
        named, stored_note = _against_stored(site, node, result)
    lost = [u["cause"] for u in result["unmeasured"] if node in u["name"].split("<->")]
    if lost:  # nothing unmeasured passes
        named = True
        stored_note = f"{node} not fully measured: " + " | ".join(lost)
    ok = not named
    result["gate_passed"] = ok
    if stored_note:
        result["verdict"]["notes"].append(stored_note)
    if not ok:
        mine = [c for c in result["verdict"]["culprits"] if node in c["nodes"]]
        codes = sorted({c.get("code") or "" for c in mine} - {""}) or ["HC-LOST"]
        ev = " | ".join(dict.fromkeys(c["evidence"] for c in mine)) or stored_note
        vslurm.drain(node, f"hpcval gate [{','.join(codes)}] {vet_id}: " + " ".join(ev.split()))
        result["drained"] = [node]
    paths = report.write(result, workdir)
    return ok, result, paths


def _against_stored(site: VetSite, node: str, result: dict[str, Any]) -> tuple[bool, str]:
    """Too few peers: the node's pairs against the healthy pairs of stored vettings."""
    stored = stored_results(site)
    healthy: list[float] = []
    for data in stored[-5:]:
        named = set(data["verdict"]["named_nodes"])
        for key, d in data["verdict"]["pairs"].items():
            if not set(key.split("|")) & named:
                healthy.append(d["value"])
    mine = [median(s) for k, s in result["pair_samples"].items() if node in k.split("|")]
    if not healthy or not mine:
        return True, ("too few peers and no stored vetting of this partition: "
                      "judged on per-node figures only")
    center, value = median(healthy), median(mine)
    worse = PAIR_BW.worse(value, center)
    bad = worse > PAIR_BW.min_effect
    return bad, (f"{node}: {PAIR_BW.label} {value:.1f} MB/s against {center:.1f} MB/s, the "
                 f"healthy pairs of {len(stored[-5:])} stored vetting(s): "
                 f"{-worse * 100:+.0f} %")
