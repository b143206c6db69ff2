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

A healthy node's step can dip again (on the 16-node lab, whose nodes share 2
cores, 3 of 16 healthy nodes fell whole to 15-30 % in one measurement, and
one such node fell again when measured a second time). So a suspect is
measured again as many times as :func:`needed` says: with ``s`` of ``n`` nodes
suspected, the share ``r = (s + 1) / (n + 1)`` estimates how often a healthy
node's step dips (after each measurement again, the share of those measured
that were off again, where that is higher: it counts real faults too, so it
errs towards more measurements), and a healthy suspect that must be off in
``k`` independent measurements is named with probability about ``r^k``; ``k``
is the fewest with ``s * r^k`` under ``TARGET`` of the partition's nodes (at
most ``MAX_AGAIN``). Each measurement holds only the suspects still off, and
one that is not off once is not named.

What this assumes: a node's fault lasts over the minutes between the
measurements (a fault that comes and goes within them is missed, and said in
the note), and the controls measured at the same moment share the suspect's
machine-wide conditions, so the second comparison sets the node against its
peers of that moment, not against the whole partition's earlier moments.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
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
#: healthy nodes named per vetting, as a share of the partition, that the number
#: of measurements again aims under (a fifth of 0.1 %: the expected count, so that
#: the worst vetting of many stays under 0.1 %); and the most measurements again
TARGET = 0.0002
MAX_AGAIN = 4


def needed(suspected: int, nodes: int, target: float = TARGET,
           most: int = MAX_AGAIN, rate: float | None = None) -> int:
    """Measurements again a suspect must be off in: the fewest ``k`` (1 to
    ``most``) with ``s * r^k <= target * n``; ``r``, how often a healthy node's
    step dips, is ``(s + 1) / (n + 1)`` or ``rate`` where that is higher."""
    if suspected <= 0:
        return 0
    r = max((suspected + 1) / (nodes + 1), rate or 0.0)
    k = 1
    while k < most and suspected * r ** k > target * nodes:
        k += 1
    return k


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
                  max_steps: int, exclude: set[str],
                  judging: JudgeSettings | None = None) -> dict[str, dict[str, Any]]:
    """The suspects and their controls, one step per figure and measurement (at
    most ``max_steps`` in all), as :func:`again_loop` decides; stored in
    ``vet.json`` as ``confirm``."""
    def step(fig: str, hosts: list[str], j: int) -> tuple[dict[str, list[float]],
                                                            dict[str, str]]:
        t0 = time.monotonic()
        got = _step(alloc, site, fig, hosts, first, settings, workdir,
                    "" if j == 0 else f"-{j + 1}")
        progress(f"{FIGURES[fig].label} measured again ({j + 1}): suspects and healthy "
                 f"controls, {', '.join(hosts)}, one step: {time.monotonic() - t0:.1f} s")
        return got
    return again_loop(nodes, wanted, step, max_steps, exclude, judging or JudgeSettings())


#: step(figure, hosts, measurement index) -> (samples per host, cause per host lost)
Step = Callable[[str, list[str], int], tuple[dict[str, list[float]], dict[str, str]]]


def again_loop(nodes: Sequence[str], wanted: Mapping[str, list[str]], step: Step,
               max_steps: int, exclude: set[str],
               settings: JudgeSettings) -> dict[str, dict[str, Any]]:
    """Measure each figure's suspects again beside ``CONTROLS`` healthy nodes,
    up to :func:`needed` times, each time only those still off. figure ->
    ``{"suspects", "controls", "samples", "why"}`` of the first measurement
    again, ``"needed"``, and ``"again"``: the later ones in the same form."""
    out: dict[str, dict[str, Any]] = {}
    used = 0
    for fig, sus in wanted.items():
        k = needed(len(sus), len(nodes))
        current = list(sus)
        runs: list[dict[str, Any]] = []
        while current and len(runs) < k and used < max_steps:
            ctrl = controls(nodes, set(sus) | exclude)
            samples, why = step(fig, [*current, *ctrl], len(runs))
            used += 1
            data = {"suspects": current, "controls": ctrl, "samples": samples, "why": why}
            runs.append(data)
            still = [n for n in current if _off(n, fig, data, settings)[0] is not False]
            # the share off again is how often a step dips again (healthy or not):
            # where it is higher than the first estimate, more measurements are needed
            k = max(k, needed(len(sus), len(nodes), rate=len(still) / len(current)))
            current = still
        if runs:
            out[fig] = {**runs[0], "needed": k, "again": runs[1:]}
        else:  # no step left for this figure: its suspects are not named on one measurement
            out[fig] = {"suspects": list(sus), "controls": [], "samples": {}, "why": {},
                        "needed": k, "again": [], "no_step_left": max_steps}
    return out


def _off(node: str, fig: str, data: Mapping[str, Any],
         settings: JudgeSettings) -> tuple[bool | None, str]:
    """Whether ``node`` is off again against the controls of one measurement
    (None: not measured, or fewer than 2 controls), and the evidence."""
    spec = FIGURES[fig]
    ctrl = [data["samples"][n] for n in data["controls"] if data["samples"].get(n)]
    mine = data["samples"].get(node)
    if not mine or len(ctrl) < 2:
        return None, (data["why"].get(node, "no samples") if not mine
                      else f"{len(ctrl)} control(s) measured")
    center = median([spec.of(s) for s in ctrl])
    value = spec.of(mine)
    worse = spec.worse(value, center)
    p = rank_test(mine, [x for s in ctrl for x in s], spec.better)
    text = (f"{_fmt(value)} against their median {_fmt(center)} {spec.unit} "
            f"({-worse * 100:+.0f} %, rank test p {p:.1g})")
    return (worse > settings.effect(spec)
            and p * len(data["suspects"]) < settings.alpha), text


def _step(alloc: Allocation, site: VetSite, fig: str, hosts: list[str],
          first: measure.NodeSamples, settings: measure.Settings, workdir: Path,
          suffix: str = "") -> tuple[dict[str, list[float]], dict[str, str]]:
    key = f"confirm-{AGAIN[fig]}{suffix}"
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
    """Keep a per-node culprit that is off again in every measurement again it
    needed (its evidence extended with them), drop one that is not (said in a
    note). A suspect that could not be measured again, or without 2 controls
    measured, stays named on its first measurement, and a note says so; one the
    step budget (``--confirm``) left short of the measurements it needed is not
    named, and a note says so."""
    kept = []
    for c in verdict.culprits:
        data = confirm.get(c.figure)
        if c.kind != "node" or data is None or c.name not in data["suspects"]:
            kept.append(c)
            continue
        spec = FIGURES[c.figure]
        if "no_step_left" in data:
            verdict.notes.append(
                f"{c.name}: {spec.label} low in the first measurement; the steps allowed "
                f"(--confirm {data['no_step_left']}) ran out before it was measured again: "
                "not named")
            continue
        runs = [data, *data.get("again", [])]
        k = int(data.get("needed", 1))
        said: list[str] = []
        keep: bool | None = True
        for j, run in enumerate(runs):
            if c.name not in run["suspects"]:
                break
            off, text = _off(c.name, c.figure, run, settings)
            n_ctrl = sum(1 for n in run["controls"] if run["samples"].get(n))
            if off is None:
                if j == 0:
                    verdict.notes.append(f"{c.name}: {spec.label} not confirmed by a second "
                                         f"measurement ({text}): named on the first")
                    keep = None
                break
            said.append(f"measured again{f' ({j + 1})' if j else ''} beside {n_ctrl} healthy "
                        f"nodes: {text}")
            if not off:
                keep = False
                break
        if keep is None:
            kept.append(c)
        elif keep is False:
            verdict.notes.append(f"{c.name}: {spec.label} low in the first measurement, not "
                                 f"again when {said[-1]}: not named")
        elif len(said) < k:
            verdict.notes.append(
                f"{c.name}: {spec.label} low in the first measurement and in {len(said)} "
                f"measurement(s) again, of the {k} needed ({len(data['suspects'])} of the "
                f"partition's nodes suspected): the steps allowed (--confirm) ran out: not "
                f"named")
        else:
            c.evidence += "; " + "; ".join(said)
            kept.append(c)
    verdict.culprits = kept
    for fig, data in confirm.items():
        sus, n = len(data["suspects"]), len(verdict.nodes)
        if sus >= 3 and sus > 0.05 * n:
            verdict.partition.append(
                f"{FIGURES[fig].label}: {sus} of {n} nodes low in the first measurement: the "
                f"partition's moment (shared cores, load), not {sus} faults; each measured "
                f"again up to {data.get('needed', 1)} time(s) beside healthy nodes")


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"
