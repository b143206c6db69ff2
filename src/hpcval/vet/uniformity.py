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


def _short(value: Any, width: int = 80) -> str:
    value = str(value)
    return value if len(value) <= width else value[:width - 3] + "..."


def _apart(value: Any, top: Any, width: int = 80) -> tuple[str, str]:
    """``value`` and the majority's ``top`` cut to ``width`` around where they first
    differ, so two long values (a kernel command line) show their difference."""
    a, b = str(value), str(top)
    if len(a) <= width and len(b) <= width:
        return a, b
    i = next((j for j, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
             min(len(a), len(b)))
    start = max(0, i - 20)

    def cut(s: str) -> str:
        part = s[start:start + width - 6]
        return ("..." if start else "") + part + ("..." if start + width - 6 < len(s) else "")
    return cut(a), cut(b)


def clean(fp: Any) -> dict[str, dict[str, str]]:
    """A probe's fingerprint as category -> key -> string (anything else left out:
    a probe line is a node's word, not trusted to have the shape)."""
    if not isinstance(fp, dict):
        return {}
    return {str(c): {str(k): str(v) for k, v in kv.items() if v is not None}
            for c, kv in fp.items() if isinstance(kv, dict)}


def clean_unknown(u: Any) -> dict[str, list[str]]:
    if not isinstance(u, dict):
        return {}
    return {str(c): [str(k) for k in ks] for c, ks in u.items() if isinstance(ks, list)}


class _Group:
    """Nodes whose fingerprints (and unreadable keys) are identical."""

    __slots__ = ("fp", "unread", "nodes")

    def __init__(self, fp: Fingerprint, unread: Mapping[str, Sequence[str]]) -> None:
        self.fp, self.unread = fp, unread
        self.nodes: list[str] = []


def _groups(fingerprints: Mapping[str, Fingerprint],
            unknown: Mapping[str, Mapping[str, Sequence[str]]]) -> list[_Group]:
    """One pass over the nodes; a uniform partition is a handful of groups."""
    groups: dict[Any, _Group] = {}
    for node, fp in fingerprints.items():
        u = unknown.get(node)
        sig = (tuple([(c, tuple(kv.items())) for c, kv in fp.items()]),
               tuple([(c, tuple(ks)) for c, ks in u.items()]) if u else ())
        g = groups.get(sig)
        if g is None:
            g = groups[sig] = _Group(fp, u or {})
        g.nodes.append(node)
    return list(groups.values())


def _majority(groups: list[_Group], rules: Rules) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    cats = sorted({c for g in groups for c in g.fp} | {c for g in groups for c in g.unread})
    total = sum(len(g.nodes) for g in groups)
    for cat in cats:
        ignored = rules.ignore_keys.get(cat, set())
        unread: Counter[str] = Counter()
        for g in groups:
            for k in g.unread.get(cat, ()):
                unread[k] += len(g.nodes)
        keys = {k for g in groups for k in (g.fp.get(cat) or {})} | set(unread)
        per_key: dict[str, Counter[str]] = {k: Counter() for k in sorted(keys - ignored)}
        for g in groups:
            have = g.fp.get(cat) or {}
            for k, c in per_key.items():
                c[have.get(k, ABSENT)] += len(g.nodes)
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


def majority(fingerprints: Mapping[str, Fingerprint],
             unknown: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
             rules: Rules | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """category -> key -> {"value", "count", "of", "unread", "counts"} over the
    nodes; ``value`` None where no value has more than half."""
    return _majority(_groups(fingerprints, unknown or {}), rules or Rules())


def _bad(cat: str, keys: Mapping[str, Mapping[str, Any]], g: _Group,
         allowed_here: Mapping[str, set[str]]) -> list[tuple[str, str, str]]:
    """(key, the group's value, how) for each key where the group is off."""
    mine = g.fp.get(cat) or {}
    unread = set(g.unread.get(cat, ()))
    bad = []
    for k, m in keys.items():
        allowed = allowed_here.get(k)
        v = UNREAD if k in unread else mine.get(k, ABSENT)
        if allowed is not None:
            if v not in allowed and v not in (ABSENT, UNREAD):
                bad.append((k, v, "allowed"))
            continue
        top = m["value"]
        if top is None or v == top:
            continue
        if v in (ABSENT, UNREAD):
            if top != ABSENT:
                bad.append((k, v, "unknown"))
        else:
            bad.append((k, v, "differs"))
    return bad


def judge(fingerprints: Mapping[str, Fingerprint],
          unknown: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
          rules: Rules | None = None, min_nodes: int = 3,
          ) -> tuple[list[Finding], dict[str, dict[str, dict[str, Any]]], list[str]]:
    """(findings, the majority per category and key, notes)."""
    rules = rules or Rules()
    if len(fingerprints) < min_nodes:
        return [], {}, [f"uniformity: {len(fingerprints)} node(s) with a fingerprint, fewer "
                        f"than {min_nodes}: no majority to judge against"]
    fingerprints = {n: clean(fp) for n, fp in fingerprints.items()}
    groups = _groups(fingerprints, {n: clean_unknown(u) for n, u in (unknown or {}).items()})
    maj = _majority(groups, rules)
    findings: list[Finding] = []
    for cat, keys in maj.items():
        code = f"HC-UNI-{cat.upper()}"
        allowed_here = rules.allow.get(cat, {})
        for k, m in keys.items():
            if m["value"] is None and k not in allowed_here and m["of"]:
                counts = ", ".join(f"{_short(v, 40)!r} on {n}" for v, n in m["counts"].items())
                findings.append(Finding(
                    "HC-UNI-SPLIT", "", f"{cat}.{k}: no value on more than half of the "
                    f"{m['of']} nodes ({counts})", value=m["counts"], baseline=None,
                    rule="majority: more than half of the nodes", category=cat))
        offs = [(node, bad) for g in groups if (bad := _bad(cat, keys, g, allowed_here))
                for node in g.nodes]
        for node, bad in sorted(offs):
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
                    mine, theirs = _apart(v, top)
                    shown = "none" if top == ABSENT else repr(theirs)
                    findings.append(Finding(
                        code, node, f"{node}: {cat}.{k} is {mine!r}; {m['count']} of "
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
    fingerprint = clean(fingerprint)
    unknown = clean_unknown(unknown)
    out: list[Finding] = []
    for cat, keys in recorded.items():
        if not isinstance(keys, dict):
            continue
        mine = fingerprint.get(cat) or {}
        unread = set(unknown.get(cat, ()))
        for k, m in keys.items():
            if k in rules.ignore_keys.get(cat, set()) or not isinstance(m, dict):
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
                mine, theirs = _apart(v, top)
                out.append(Finding(f"HC-UNI-{cat.upper()}", node,
                                   f"{cat}.{k} is {mine!r}; {m['count']} of {m['of']} "
                                   f"nodes had {'none' if top == ABSENT else repr(theirs)} "
                                   f"(vet {vet_id})", value=v,
                                   baseline=None if top == ABSENT else top,
                                   rule="the majority of the last full vetting"))
    return out
