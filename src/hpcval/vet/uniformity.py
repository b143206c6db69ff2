"""Is each node like the others? Its fingerprint against the partition's majority.

The probe prints a node's ``fingerprint`` (category -> key -> value, values
that differ by nature never among them) and ``fingerprint_unknown`` (category
-> keys it could not read). For every key the partition's **majority** is the
value more than half of the nodes that could be read hold (a key a node does
not have at all counts as the value "absent"). Then:

- a node with another value: ``HC-UNI-<CATEGORY>``, with the majority value
  and how many nodes hold it;
- a node without the key (or that could not read it) where the majority has
  it: ``HC-UNI-UNKNOWN``, named, never a silent pass;
- no value held by more than half (2 against 2): one ``HC-UNI-SPLIT`` about the
  partition, not one per node;
- a key with values the site allows (``vet-rules.yaml`` ``allow``): a node with
  an allowed value is fine, one with another is named against the allowed set.

Fast: nodes with identical categories are grouped first (a uniform partition
is a handful of groups), so 16,384 nodes judge in a fraction of a second.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from hpcval.vet.findings import Finding
from hpcval.vet.rules import Rules

Fingerprint = Mapping[str, Mapping[str, str]]
ABSENT = "(absent)"
UNREAD = "(unreadable)"


def _short(value: str, width: int = 80) -> str:
    return value if len(value) <= width else value[:width - 3] + "..."


def majority(fingerprints: Mapping[str, Fingerprint],
             unknown: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
             rules: Rules | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """category -> key -> {"value", "count", "of", "counts"} over the nodes;
    ``value`` None where no value has more than half."""
    rules = rules or Rules()
    unknown = unknown or {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    cats = sorted({c for fp in fingerprints.values() for c in fp}
                  | {c for u in unknown.values() for c in u})
    for cat in cats:
        ignored = rules.ignore_keys.get(cat, set())
        # group the nodes by their whole category (most nodes share one)
        groups: Counter[tuple[tuple[str, str], ...]] = Counter()
        unread: Counter[str] = Counter()
        for node, fp in fingerprints.items():
            groups[tuple(sorted((fp.get(cat) or {}).items()))] += 1
            for k in (unknown.get(node) or {}).get(cat, ()):
                unread[k] += 1
        keys = {k for g in groups for k, _ in g} | set(unread)
        per_key: dict[str, Counter[str]] = {k: Counter() for k in keys - ignored}
        total = sum(groups.values())
        for g, n in groups.items():
            have = dict(g)
            for k, c in per_key.items():
                c[have.get(k, ABSENT)] += n
        for k, c in per_key.items():
            if unread[k]:  # an unreadable key is not "absent": it is not counted at all
                c[ABSENT] -= unread[k]
                if c[ABSENT] <= 0:
                    del c[ABSENT]
            known = total - unread[k]
            top, count = c.most_common(1)[0] if c else (None, 0)
            out.setdefault(cat, {})[k] = {
                "value": top if known and count * 2 > known else None,
                "count": count, "of": known, "unread": unread[k],
                "counts": dict(c.most_common(5))}
    return out


def judge(fingerprints: Mapping[str, Fingerprint],
          unknown: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
          rules: Rules | None = None, min_nodes: int = 3,
          ) -> tuple[list[Finding], dict[str, dict[str, dict[str, Any]]], list[str]]:
    """(findings, the majority per category and key, notes)."""
    rules = rules or Rules()
    unknown = unknown or {}
    if len(fingerprints) < min_nodes:
        return [], {}, [f"uniformity: {len(fingerprints)} node(s) with a fingerprint, fewer "
                        f"than {min_nodes}: no majority to judge against"]
    maj = majority(fingerprints, unknown, rules)
    findings: list[Finding] = []
    for cat, keys in maj.items():
        code = f"HC-UNI-{cat.upper()}"
        allowed_here = rules.allow.get(cat, {})
        for k, m in keys.items():
            allowed = allowed_here.get(k)
            if m["value"] is None and allowed is None and m["of"]:
                counts = ", ".join(f"{_short(v, 40)!r} on {n}" for v, n in m["counts"].items())
                findings.append(Finding(
                    "HC-UNI-SPLIT", "", f"{cat}.{k}: no value on more than half of the "
                    f"{m['of']} nodes ({counts})", value=m["counts"], baseline=None,
                    rule="majority: more than half of the nodes", category=cat))
        # nodes: compare the node's category with the majority, key by key
        want = {k: m["value"] for k, m in keys.items()}
        checked: dict[tuple[tuple[str, str], ...], list[tuple[str, str, str]]] = {}
        for node in sorted(fingerprints):
            mine = fingerprints[node].get(cat) or {}
            unread = set((unknown.get(node) or {}).get(cat, ()))
            sig = (tuple(sorted(mine.items())), tuple(sorted(unread)))
            bad = checked.get(sig)  # type: ignore[arg-type]
            if bad is None:
                bad = []
                for k in keys:
                    allowed = allowed_here.get(k)
                    v = UNREAD if k in unread else mine.get(k, ABSENT)
                    if allowed is not None:
                        if v not in allowed and v not in (ABSENT, UNREAD):
                            bad.append((k, v, "allowed"))
                        continue
                    top = want[k]
                    if top is None or v == top:
                        continue
                    if v in (ABSENT, UNREAD):
                        if top != ABSENT:
                            bad.append((k, v, "unknown"))
                    else:
                        bad.append((k, v, "differs"))
                checked[sig] = bad  # type: ignore[index]
            for k, v, how in bad:
                m = keys[k]
                if how == "allowed":
                    allowed = sorted(allowed_here[k])
                    findings.append(Finding(
                        code, node, f"{node}: {cat}.{k} is {_short(v)!r}, not among the values "
                        f"the site allows ({', '.join(repr(a) for a in allowed)})",
                        value=v, baseline=allowed, deviation="not allowed",
                        rule=f"{rules.source}: allow.{cat}.{k}"))
                elif how == "unknown":
                    what = "could not be read" if v == UNREAD else "is absent"
                    findings.append(Finding(
                        "HC-UNI-UNKNOWN", node, f"{node}: {cat}.{k} {what}; {m['count']} of "
                        f"{m['of']} nodes have {_short(m['value'])!r}", value=None,
                        baseline=m["value"], deviation=what,
                        rule="a key the majority has must be read on every node",
                        category=cat))
                else:
                    top = m["value"]
                    shown = "none" if top == ABSENT else repr(_short(top))
                    findings.append(Finding(
                        code, node, f"{node}: {cat}.{k} is {_short(v)!r}; {m['count']} of "
                        f"{m['of']} nodes have {shown}", value=v,
                        baseline=None if top == ABSENT else top,
                        deviation=f"differs from {m['count']} of {m['of']} nodes",
                        rule="the partition's majority (more than half)"))
    return findings, maj, []


def against_recorded(node: str, fingerprint: Fingerprint,
                     unknown: Mapping[str, Sequence[str]] | None,
                     recorded: Mapping[str, Mapping[str, Mapping[str, Any]]], vet_id: str,
                     rules: Rules | None = None) -> list[Finding]:
    """One node (``hpcval health``) against the majority a vetting recorded
    (``vet.json`` ``fingerprint_majority``)."""
    rules = rules or Rules()
    unknown = unknown or {}
    out: list[Finding] = []
    for cat, keys in recorded.items():
        mine = fingerprint.get(cat) or {}
        unread = set(unknown.get(cat, ()))
        for k, m in keys.items():
            if k in rules.ignore_keys.get(cat, set()):
                continue
            v = UNREAD if k in unread else mine.get(k, ABSENT)
            allowed = rules.allow.get(cat, {}).get(k)
            if allowed is not None:
                if v not in allowed and v not in (ABSENT, UNREAD):
                    out.append(Finding(f"HC-UNI-{cat.upper()}", node,
                                       f"{cat}.{k} is {_short(v)!r}, not allowed by "
                                       f"{rules.source}", value=v, baseline=sorted(allowed),
                                       rule=f"{rules.source}: allow.{cat}.{k}"))
                continue
            top = m.get("value")
            if top is None or v == top:
                continue
            if v in (ABSENT, UNREAD):
                if top != ABSENT:
                    out.append(Finding("HC-UNI-UNKNOWN", node, f"{cat}.{k} "
                                       f"{'could not be read' if v == UNREAD else 'is absent'}"
                                       f"; {m['count']} of {m['of']} nodes had "
                                       f"{_short(top)!r} (vet {vet_id})", baseline=top,
                                       category=cat))
            else:
                out.append(Finding(f"HC-UNI-{cat.upper()}", node,
                                   f"{cat}.{k} is {_short(v)!r}; {m['count']} of {m['of']} "
                                   f"nodes had {'none' if top == ABSENT else repr(_short(top))} "
                                   f"(vet {vet_id})", value=v,
                                   baseline=None if top == ABSENT else top,
                                   rule="the majority of the last full vetting"))
    return out
