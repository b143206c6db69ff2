"""Confirm before naming: a node suspected on a per-node figure is measured again.

A node's per-node samples (its 5 shared-memory PingPongs, its 5 triads, its 5
CPU frequency readings) are taken back to back by the same processes in one
step: they share that moment's scheduling luck and are one draw, not five. On
a busy machine one node's five can all fall low together, and the rank test,
which takes them as five independent draws, then calls a healthy node off
(p 2e-06 to 3e-04 on the lab). So a node the first measurement names on a
per-node figure is only a suspect: after the rounds of pairs it is measured
again, minutes later, in one step beside ``CONTROLS`` healthy nodes of the same
partition measured at the same moment, and named only if it is off again
against them (worse than their median by the figure's ``min_effect``, and its
new samples below theirs by a one-sided rank test at ``alpha`` over the
suspects). A dip that does not come back is not named; it is said in a note.

What this assumes: a node's fault lasts over the minutes between the two
measurements (a fault that comes and goes within them is missed, and said in
the note), and the controls measured at the same moment share the suspect's
machine-wide conditions, so the second comparison sets the node against its
peers of that moment, not against the whole partition's earlier moments.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcval.core.errors import ParseError
from hpcval.vet import measure
from hpcval.vet.judge import (
    FIGURES,
    JudgeSettings,
    Verdict,
    judge_node_figure,
    median,
    rank_test,
)
from hpcval.vet.sitecfg import VetSite
from hpcval.vet.slurm import Allocation

#: per-node figures confirmed before naming, and the step that measures each again
AGAIN = {"shm_pingpong_bw_1MiB": "shm-pingpong", "triad_bw": "triad", "cpu_mhz": "probe",
         "dgemm_gflops": "dgemm"}
#: healthy nodes measured beside the suspects
CONTROLS = 4


def suspects(figures: Mapping[str, Mapping[str, Sequence[float]]], nodes: Sequence[str],
             settings: JudgeSettings) -> dict[str, list[str]]:
    """figure -> the nodes its first measurement names (the judging of
    :func:`hpcval.vet.judge.judge_node_figure`), for the figures of :data:`AGAIN`."""
    out: dict[str, list[str]] = {}
    for fig in AGAIN:
        samples = figures.get(fig)
        if not samples:
            continue
        verdict = Verdict(nodes=list(nodes))
        judge_node_figure(samples, FIGURES[fig], settings, verdict)
        named = [c.name for c in verdict.culprits]
        if named:
            out[fig] = named
    return out


def controls(nodes: Sequence[str], exclude: set[str], k: int = CONTROLS) -> list[str]:
    """``k`` nodes not excluded, spread evenly over the partition's order."""
    pool = [n for n in nodes if n not in exclude]
    if len(pool) <= k:
        return pool
    return [pool[int(i * len(pool) / k)] for i in range(k)]


def measure_again(alloc: Allocation, site: VetSite, nodes: Sequence[str],
                  wanted: Mapping[str, list[str]], first: measure.NodeSamples,
                  settings: measure.Settings, workdir: Path, progress: measure.Progress,
                  max_steps: int, exclude: set[str]) -> dict[str, dict[str, Any]]:
    """One step per figure with suspects (at most ``max_steps``): the suspects and
    their controls at once. figure -> ``{"suspects", "controls", "samples": {node:
    samples}, "why": {node: cause}}`` (stored in ``vet.json`` as ``confirm``)."""
    out: dict[str, dict[str, Any]] = {}
    for fig, sus in list(wanted.items())[:max_steps]:
        ctrl = controls(nodes, set(sus) | exclude)
        hosts = [*sus, *ctrl]
        t0 = time.monotonic()
        samples, why = _step(alloc, site, fig, hosts, first, settings, workdir)
        out[fig] = {"suspects": sus, "controls": ctrl, "samples": samples, "why": why}
        progress(f"{FIGURES[fig].label} measured again on {', '.join(sus)} beside "
                 f"{len(ctrl)} healthy node(s), one step: {time.monotonic() - t0:.1f} s")
    return out


def _step(alloc: Allocation, site: VetSite, fig: str, hosts: list[str],
          first: measure.NodeSamples, settings: measure.Settings, workdir: Path,
          ) -> tuple[dict[str, list[float]], dict[str, str]]:
    key = f"confirm-{AGAIN[fig]}"
    samples: dict[str, list[float]] = {}
    why: dict[str, str] = {}
    if AGAIN[fig] == "shm-pingpong":
        msglen = measure.write_msglen(workdir / "msglen-shm.txt", settings.samples)
        res = alloc.run(key, [h for n in hosts for h in (n, n)], measure._imb(site, msglen, 20),
                        {**site.env, "I_MPI_DEBUG": "4"}, settings.step_timeout, workdir,
                        measure._mpi(site))
        measure._save(workdir / "raw", key, res)
        try:
            got, lost = measure.multi_pingpong(res.stdout, [(n, n) for n in hosts], key)
        except ParseError as err:
            got, lost = {}, {g: f"{err}; {measure._why(res)}" for g in range(len(hosts))}
        for g, n in enumerate(hosts):
            if g in got:
                samples[n] = got[g][0]
            else:
                why[n] = lost.get(g, measure._why(res))
        return samples, why
    triad = AGAIN[fig] in ("triad", "dgemm")
    dgemm = AGAIN[fig] == "dgemm"
    cmd = (first.dgemm_cmd if dgemm else first.triad_cmd if triad else
           [sys.executable, "-m", "hpcval.vet.probe", f"--samples={settings.samples}"])
    res = alloc.run(key, hosts, cmd, first.dgemm_env if dgemm else site.env,
                    settings.step_timeout * (settings.samples if triad else 1), workdir,
                    independent=True)
    measure._save(workdir / "raw", key, res)
    lines = measure._task_lines(res, hosts)
    for i, n in enumerate(hosts):
        data = lines.get(n)
        if data is None:
            why[n] = measure._task_cause(res, n, i)
        elif triad and data["errors"]:
            why[n] = "; ".join(data["errors"])
        else:
            samples[n] = (data["dgemm"]["gflops"] if dgemm else
                          data["triad_bw" if triad else "cpu_mhz"])
    return samples, why


def judge_again(verdict: Verdict, confirm: Mapping[str, Mapping[str, Any]],
                settings: JudgeSettings) -> None:
    """Keep a per-node culprit that the second measurement confirms (its evidence
    extended with it), drop one it does not (said in a note). A suspect that could
    not be measured again, or without 2 controls measured, stays named on its
    first measurement, and a note says so."""
    kept = []
    for c in verdict.culprits:
        data = confirm.get(c.figure)
        if c.kind != "node" or data is None or c.name not in data["suspects"]:
            kept.append(c)
            continue
        spec = FIGURES[c.figure]
        ctrl = [data["samples"][n] for n in data["controls"] if data["samples"].get(n)]
        mine = data["samples"].get(c.name)
        if not mine or len(ctrl) < 2:
            cause = (data["why"].get(c.name, "no samples") if not mine
                     else f"{len(ctrl)} control(s) measured")
            verdict.notes.append(f"{c.name}: {spec.label} not confirmed by a second "
                                 f"measurement ({cause}): named on the first")
            kept.append(c)
            continue
        center = median([spec.of(s) for s in ctrl])
        value = spec.of(mine)
        worse = spec.worse(value, center)
        p = rank_test(mine, [x for s in ctrl for x in s], spec.better)
        again = (f"measured again beside {len(ctrl)} healthy nodes: {_fmt(value)} against "
                 f"their median {_fmt(center)} {spec.unit} ({-worse * 100:+.0f} %, rank test "
                 f"p {p:.1g})")
        if worse > settings.effect(spec) and p * len(data["suspects"]) < settings.alpha:
            c.evidence += f"; {again}"
            kept.append(c)
        else:
            verdict.notes.append(f"{c.name}: {spec.label} low in the first measurement, not "
                                 f"again when {again}: not named")
    verdict.culprits = kept


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"
