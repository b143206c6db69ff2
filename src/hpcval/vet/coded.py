"""Every finding of a vetting with its code: the figures' culprits coded, the
fingerprint (:mod:`hpcval.vet.uniformity`) and the error counters
(:mod:`hpcval.vet.counters`) judged, the site's rules (:mod:`hpcval.vet.rules`)
applied, and each finding about a node named as a culprit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpcval.vet import counters, uniformity
from hpcval.vet.findings import CODES, Finding, culprit_code
from hpcval.vet.model import Culprit, JudgeSettings, Verdict
from hpcval.vet.rules import Rules


def _figure_finding(c: Culprit, verdict: Verdict, settings: JudgeSettings) -> Finding:
    code = culprit_code(c.kind, c.figure)
    d = verdict.table.get(c.name, {}).get(c.figure) if c.kind == "node" else None
    if c.kind == "link":
        d = verdict.pairs.get(c.name.replace("<->", "|"))
    return Finding(code, c.name if c.kind == "node" else "", c.evidence,
                   value=d.value if d else None, baseline=d.center if d else None,
                   deviation=d.percent() if d else "",
                   rule=(f"robust z > {settings.z:g} and worse than the partition by more than "
                         "the figure's practical minimum") if d else "",
                   extra={"kind": c.kind, "name": c.name, "nodes": c.nodes})


def judge(verdict: Verdict, fingerprints: Mapping[str, Any], unknown: Mapping[str, Any],
          readings: Mapping[str, Any], previous: Mapping[str, Any] | None,
          settings: JudgeSettings, rules: Rules | None = None) -> None:
    """Code the verdict's culprits, judge fingerprints and counters, apply the rules."""
    rules = rules or Rules()
    found: list[Finding] = []
    for c in verdict.culprits:
        found.append(_figure_finding(c, verdict, settings))
    figure_count = len(found)
    if fingerprints:
        uni, maj, notes = uniformity.judge(fingerprints, unknown, rules,
                                           min_nodes=max(3, settings.min_nodes - 1))
        verdict.majority = maj
        verdict.notes += notes
        found += uni
    if readings:
        cnt, notes = counters.judge(readings, previous or {}, rules)
        verdict.notes += notes
        found += cnt
    kept, ignored = rules.apply(found)
    verdict.notes += ignored
    kept_ids = {id(f) for f in kept}
    # the figures' culprits: coded, or left out where the site ignores their code
    culprits = []
    for c, f in zip(verdict.culprits, found[:figure_count], strict=True):
        if id(f) in kept_ids:
            c.code, c.severity, c.remedy = f.code, f.severity, f.remedy
            culprits.append(c)
    for f in found[figure_count:]:
        if id(f) not in kept_ids:
            continue
        if f.node:
            culprits.append(Culprit("node", f.node, f.code, f.text, [f.node],
                                    f.code, f.severity, f.remedy))
        else:
            verdict.partition.append(f"[{f.code}] {f.text}; remedy: {f.remedy}")
    verdict.culprits = culprits
    verdict.findings = [f.to_dict() for f in kept]


def lost(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The unmeasured nodes and pairs of a vetting as ``HC-LOST`` findings."""
    out = []
    for u in result.get("unmeasured", []):
        f = Finding("HC-LOST", u["name"] if u["kind"] == "node" else "",
                    f"{u['kind']} {u['name']}: {u['cause']}", extra={"kind": u["kind"]})
        out.append(f.to_dict())
    return out


def remedy(code: str) -> str:
    return CODES[code].remedy if code in CODES else ""
