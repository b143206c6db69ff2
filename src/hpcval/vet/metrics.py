"""The last vetting of each partition and each node's last gate, as metrics.

``hpcval export`` adds these families to a run's (:mod:`hpcval.reporting.export`,
the same conventions: gauges without timestamps, one label set per node, link
or finding, the vetting's id only in ``hpcval_vet_info``):

- the last vetting of each partition (``var/<site>/vet/<id>/vet.json`` without a
  ``gate``): when it ran, whether it was judged and complete, every node's
  verdict (a StateSet: ``ok``, ``named``, ``unmeasured``, ``skipped``), every
  node's figures with the partition median and the deviation they were judged
  on, every measured link's PingPong, every finding with its code, every node
  or pair left unmeasured, the nodes ``--drain`` drained;
- the last ``hpcval vet --gate NODE`` of each node (a vet.json with ``gate``)
  and the last ``hpcval health`` of each node (``var/<site>/health/*.json``):
  passed or not (a node that did not pass was drained by ``--gate``, and by
  ``hpcval health --drain``), when, and the gate's figures.

A finding's code is ``<kind>/<figure>``: ``node/pingpong_bw_1MiB``,
``link/pingpong_bw_1MiB``, ``switch/pingpong_bw_1MiB``, ``node/triad_bw``,
``node/tuning``, ``gpu/gpu_triad_bw``, ...; a node or pair left unmeasured is
``unmeasured/node`` or ``unmeasured/pair``. A stored file that cannot be read is
counted (``hpcval_vet_unreadable_files``) and named in :attr:`VetMetrics.skipped`,
never a crash of the export.
"""

from __future__ import annotations

import calendar
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.reporting.export import Families, states
from hpcval.vet.model import FIGURES

#: A node's verdict in a vetting, in this order (docs/scheduling.md).
NODE_VERDICTS = ("ok", "named", "unmeasured", "skipped")

HELP: dict[str, str] = {
    "hpcval_vet_info": "The last vetting of the partition: its id (value 1)",
    "hpcval_vet_start_time_seconds": "When the last vetting of the partition started "
                                     "(Unix time)",
    "hpcval_vet_judged": "1 when the last vetting judged its nodes against each other, 0 "
                         "when it had too few nodes",
    "hpcval_vet_complete": "1 when every node and pair of the last vetting was measured, 0 "
                           "when it was incomplete (exit 4)",
    "hpcval_vet_nodes": "Nodes of the last vetting by verdict",
    "hpcval_vet_named": "Culprits the last vetting named, by kind (node, link, switch, gpu)",
    "hpcval_vet_partition_findings": "Findings about the whole partition (its median worse "
                                     "than a site reference)",
    "hpcval_vet_node_verdict": "1 for the node's verdict in the last vetting, 0 for the others",
    "hpcval_vet_node_figure": "The node's figure in the last vetting",
    "hpcval_vet_node_figure_median": "The partition median the node's figure was judged "
                                     "against",
    "hpcval_vet_node_figure_worse_ratio": "How much worse the node's figure is than the "
                                          "partition median (0.3 = 30 % worse, < 0 better)",
    "hpcval_vet_node_figure_z": "Robust z of the node's figure, towards worse",
    "hpcval_vet_node_figure_off": "1 when the node's figure was off, 0 when not",
    "hpcval_vet_link_figure": "The link's PingPong 1 MiB bandwidth (median of its samples)",
    "hpcval_vet_link_figure_worse_ratio": "How much worse the link is than the pairs it was "
                                          "judged against (0.3 = 30 % worse)",
    "hpcval_vet_link_off": "1 when the link's figure was off, 0 when not",
    "hpcval_vet_finding": "1 for each finding of the last vetting: what was named, and its "
                          "code",
    "hpcval_vet_unmeasured": "1 for each node or node pair the last vetting could not measure",
    "hpcval_vet_node_drained": "1 for each node the last vetting drained (--drain)",
    "hpcval_vet_unreadable_files": "Stored vetting and health results that could not be read",
    "hpcval_gate_passed": "1 when the node's last `hpcval vet --gate` let it back, 0 when it "
                          "drained it",
    "hpcval_gate_time_seconds": "When the node's last gate started (Unix time)",
    "hpcval_health_passed": "1 when the node's last `hpcval health` found it fit, 0 when off "
                            "(drained with --drain)",
    "hpcval_health_time_seconds": "When the node's last health check ran (Unix time)",
    "hpcval_health_figure": "The node's figure in its last health check",
    "hpcval_health_figure_worse_ratio": "How much worse than the yardstick (0.3 = 30 % worse)",
    "hpcval_health_figure_off": "1 when the figure was off against the yardstick, 0 when not",
}


@dataclass
class VetMetrics:
    families: Families
    #: stored files that could not be read, each with why
    skipped: list[str] = field(default_factory=list)
    #: whether any vetting or health result was found
    found: bool = False


def _unix(stamp: Any, fallback_id: str = "") -> float | None:
    """``2026-11-23T20:16:52Z`` (or the run id's ``20261123T201652Z``) as Unix time."""
    for text, fmt in ((stamp, "%Y-%m-%dT%H:%M:%SZ"), (fallback_id[:16], "%Y%m%dT%H%M%SZ")):
        if isinstance(text, str) and text:
            try:
                return float(calendar.timegm(time.strptime(text, fmt)))
            except ValueError:
                continue
    return None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return None if math.isnan(value) else float(value)


def _read(path: Path, skipped: list[str]) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        skipped.append(f"{path}: {err}")
        return None
    if not isinstance(data, dict):
        skipped.append(f"{path}: not a JSON object")
        return None
    return data


def collect(var: Path, site: str) -> VetMetrics:
    """The families of the vettings and gates stored under ``var`` (``var/<site>``)."""
    out = VetMetrics(Families(HELP))
    vettings: dict[str, dict[str, Any]] = {}
    gates: dict[str, dict[str, Any]] = {}
    for path in sorted((var / "vet").glob("*/vet.json")):
        data = _read(path, out.skipped)
        if data is None:
            continue
        try:
            key, partition = str(data["id"]), str(data["partition"])
            nodes = data["verdict"]["nodes"]
        except (KeyError, TypeError):
            out.skipped.append(f"{path}: no id, partition or verdict")
            continue
        if data.get("gate"):
            node = str(data["gate"])
            if node not in gates or key > gates[node]["id"]:
                gates[node] = data
        elif isinstance(nodes, list) and (partition not in vettings
                                          or key > vettings[partition]["id"]):
            vettings[partition] = data
    for partition in sorted(vettings):
        try:
            _vetting(out.families, site, vettings[partition])
        except (KeyError, TypeError, AttributeError) as err:
            out.skipped.append(f"vetting {vettings[partition]['id']}: missing {err}")
    for node in sorted(gates):
        data = gates[node]
        labels = {"site": site, "partition": str(data["partition"]), "node": node}
        out.families.add("hpcval_gate_passed", labels, 1 if data.get("gate_passed") else 0)
        out.families.add("hpcval_gate_time_seconds", labels,
                         _unix(data.get("started"), str(data["id"])))
    health: dict[str, dict[str, Any]] = {}
    for path in sorted((var / "health").glob("*.json")):
        data = _read(path, out.skipped)
        if data is None:
            continue
        verdict = data.get("verdict")
        if not isinstance(verdict, dict) or not verdict.get("node") or "id" not in data:
            out.skipped.append(f"{path}: no id or verdict")
            continue
        node = str(verdict["node"])
        if node not in health or str(data["id"]) > str(health[node]["id"]):
            health[node] = data
    for node in sorted(health):
        _health(out.families, site, health[node])
    out.found = bool(vettings or gates or health)
    out.families.add("hpcval_vet_unreadable_files", {"site": site}, len(out.skipped))
    return out


def _verdicts(result: dict[str, Any]) -> dict[str, str]:
    verdict = result["verdict"]
    out = dict.fromkeys(verdict["nodes"], "ok")
    for c in verdict.get("culprits", []):
        for n in c.get("nodes", []):
            out[n] = "named"
    for u in result.get("unmeasured", []):
        if u.get("kind") == "node":
            out[u["name"]] = "unmeasured"
    for n in result.get("skipped", {}) or {}:
        out[n] = "skipped"
    return out


def _vetting(fam: Families, site: str, result: dict[str, Any]) -> None:
    verdict = result["verdict"]
    part = {"site": site, "partition": str(result["partition"])}
    fam.add("hpcval_vet_info", {**part, "vet": str(result["id"]),
                                "environ": str(result.get("environ") or "")}, 1)
    fam.add("hpcval_vet_start_time_seconds", part,
            _unix(result.get("started"), str(result["id"])))
    fam.add("hpcval_vet_judged", part, 1 if verdict.get("judged", True) else 0)
    fam.add("hpcval_vet_complete", part, 0 if result.get("unmeasured") else 1)
    verdicts = _verdicts(result)
    for state in NODE_VERDICTS:
        fam.add("hpcval_vet_nodes", {**part, "verdict": state},
                sum(1 for v in verdicts.values() if v == state))
    culprits = verdict.get("culprits", [])
    for kind in ("node", "link", "switch", "gpu"):
        fam.add("hpcval_vet_named", {**part, "kind": kind},
                sum(1 for c in culprits if c["kind"] == kind))
    fam.add("hpcval_vet_partition_findings", part, len(verdict.get("partition", [])))
    for node, state in sorted(verdicts.items()):
        for s in states(state, NODE_VERDICTS):
            fam.add("hpcval_vet_node_verdict", {**part, "node": node, "verdict": s},
                    1 if s == state else 0)
    for node, figs in sorted(verdict.get("table", {}).items()):
        for fig, d in sorted(figs.items()):
            spec = FIGURES.get(fig)
            labels = {**part, "node": node, "figure": fig, "unit": spec.unit if spec else ""}
            fam.add("hpcval_vet_node_figure", labels, _num(d.get("value")))
            fam.add("hpcval_vet_node_figure_median", labels, _num(d.get("center")))
            fam.add("hpcval_vet_node_figure_worse_ratio", labels, _num(d.get("worse_by")))
            fam.add("hpcval_vet_node_figure_z", labels, _num(d.get("z")))
            fam.add("hpcval_vet_node_figure_off", labels, 1 if d.get("low") else 0)
    for key, d in sorted(verdict.get("pairs", {}).items()):
        a, _, b = key.partition("|")
        labels = {**part, "link": f"{a}<->{b}", "node_a": a, "node_b": b}
        fam.add("hpcval_vet_link_figure", labels, _num(d.get("value")))
        fam.add("hpcval_vet_link_figure_worse_ratio", labels, _num(d.get("worse_by")))
        fam.add("hpcval_vet_link_off", labels, 1 if d.get("low") else 0)
    seen: set[tuple[str, str, str]] = set()
    for c in culprits:
        key3 = (str(c["kind"]), str(c["name"]), str(c["figure"]))
        if key3 in seen:
            continue
        seen.add(key3)
        fam.add("hpcval_vet_finding", {**part, "kind": key3[0], "name": key3[1],
                                       "figure": key3[2], "code": f"{key3[0]}/{key3[2]}"}, 1)
    for u in result.get("unmeasured", []):
        kind = str(u.get("kind", ""))
        fam.add("hpcval_vet_unmeasured", {**part, "kind": kind, "name": str(u.get("name", "")),
                                          "code": f"unmeasured/{kind}"}, 1)
    for node in result.get("drained", []) or []:
        fam.add("hpcval_vet_node_drained", {**part, "node": str(node)}, 1)


def _health(fam: Families, site: str, data: dict[str, Any]) -> None:
    verdict = data["verdict"]
    node = str(verdict["node"])
    labels = {"site": site, "partition": str(data.get("partition") or ""), "node": node}
    fam.add("hpcval_health_passed", labels, 1 if verdict.get("ok") else 0)
    fam.add("hpcval_health_time_seconds", labels, _unix(None, str(data["id"])))
    figures = verdict.get("figures") or {}
    for fig, d in sorted(figures.items() if isinstance(figures, dict) else ()):
        spec = FIGURES.get(fig)
        flabels = {**labels, "figure": fig, "unit": spec.unit if spec else ""}
        fam.add("hpcval_health_figure", flabels, _num(d.get("value")))
        for y in d.get("yardsticks", []):
            ylabels = {**flabels, "against": str(y.get("against", ""))}
            fam.add("hpcval_health_figure_worse_ratio", ylabels, _num(y.get("worse_by")))
            fam.add("hpcval_health_figure_off", ylabels, 1 if y.get("off") else 0)
