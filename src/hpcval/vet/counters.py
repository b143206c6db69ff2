"""Error counters judged as a rate since the node's previous stored reading.

The probe prints each node's cumulative error counters (``counters``: name ->
int, or null for a counter that exists but could not be read; names such as
``memory/edac/mc0/ue``, ``network/ib/mlx5_0/1/symbol_error``). A vetting
stores them per node with the time read (``vet.json`` ``counters``), as does
the health gate (its record's ``counters``); the node's **previous reading** is
the latest of these. Rules (defaults in :mod:`hpcval.vet.rules`, a site
changes them in ``vet-rules.yaml``):

- any uncorrected ECC error since the previous reading: ``HC-ECC-UE``, off;
- with no previous reading (the node's first vetting) the counters are
  recorded as its baseline and judged only for uncorrected errors at all
  (``ue`` > 0), said as "baseline recorded";
- IB symbol errors, link error recovery, link downed, port receive errors,
  NIC rx/tx errors, machine-check events: rate per hour since the previous
  reading (over at least :data:`MIN_HOURS`) above the code's threshold (0: any
  rise), suspect;
- corrected ECC: rate above ``max(threshold, factor x partition median
  rate)``, suspect;
- a counter that fell (reboot, driver reload) is taken as counted from zero;
- a counter that cannot be read (null), or a whole counter source (EDAC, IB,
  NIC, MCE) absent on a node where more than half of the partition (or the
  node's own previous reading) has it: ``HC-CNT-UNKNOWN``, named.
"""

from __future__ import annotations

import functools
import glob
import json
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcval.core import trust
from hpcval.vet.findings import COUNTER_CODES, Finding
from hpcval.vet.ranks import median
from hpcval.vet.rules import Rules

Reading = Mapping[str, Any]  # {"time": epoch seconds, "values": {name: int | None}}

#: a rate is taken over at least this many hours: one error between two health
#: runs a minute apart is 1/h, not 60/h (a threshold of 10/h then needs 11 errors)
MIN_HOURS = 1.0

_SOURCE_NAMES = {"memory/edac": "EDAC (memory error) counters",
                 "network/ib": "InfiniBand port counters",
                 "network/nic": "network interface error counters",
                 "cpu/mce": "machine-check counters"}


@functools.cache
def source_of(name: str) -> str:
    return "/".join(name.split("/", 2)[:2])


@functools.cache
def code_of(name: str) -> str | None:
    if name.startswith("cpu/mce/"):
        return "HC-MCE"
    return COUNTER_CODES.get(name.rsplit("/", 1)[-1])


_SOURCES: dict[tuple[str, ...], frozenset[str]] = {}


def _sources(values: Mapping[str, Any]) -> frozenset[str]:
    """The counter sources of a reading (cached by its names: nodes share them)."""
    key = tuple(values)
    got = _SOURCES.get(key)
    if got is None:
        if len(_SOURCES) > 1024:
            _SOURCES.clear()
        got = _SOURCES[key] = frozenset(source_of(n) for n in values)
    return got


def judge(current: Mapping[str, Reading], previous: Mapping[str, Reading | None],
          rules: Rules | None = None, partition_sources: bool = True,
          ) -> tuple[list[Finding], list[str]]:
    """Findings and notes for every node in ``current`` (node -> its reading now)
    against ``previous`` (node -> its previous reading, or None)."""
    rules = rules or Rules()
    findings: list[Finding] = []
    notes: list[str] = []
    # node -> code -> [delta total, hours, [counter names that rose]]
    rises: dict[str, dict[str, list[Any]]] = {}
    first: list[str] = []
    have_source: dict[str, int] = defaultdict(int)
    node_sources: dict[str, set[str]] = {}
    gone: dict[str, list[str]] = defaultdict(list)  # source -> nodes that had it before
    for node, now in current.items():
        values = now.get("values") or {}
        srcs = _sources(values)
        node_sources[node] = srcs
        for s in srcs:
            have_source[s] += 1
        prev = previous.get(node)
        pvals = (prev or {}).get("values") or {}
        hours = max((float(now["time"]) - float(prev["time"])) / 3600.0, 1 / 3600) \
            if prev else 0.0
        unread = [n for n, v in values.items() if v is None] if None in values.values() else []
        if unread:
            shown = ", ".join(sorted(unread)[:5]) + (f" and {len(unread) - 5} more"
                                                     if len(unread) > 5 else "")
            findings.append(Finding("HC-CNT-UNKNOWN", node, f"{node}: {len(unread)} error "
                                    f"counter(s) could not be read: {shown}",
                                    value=None, rule="an error counter must be readable",
                                    category=source_of(unread[0]).split("/")[0]))
        if prev:
            for s in sorted(_sources(pvals) - srcs):
                gone[s].append(node)
        mine: dict[str, list[Any]] = {}
        if prev is None:
            first.append(node)
            ue = {n: v for n, v in values.items()
                  if isinstance(v, int) and v > 0 and code_of(n) == "HC-ECC-UE"}
            if ue:
                total = sum(ue.values())
                findings.append(Finding(
                    "HC-ECC-UE", node, f"{node}: {total} uncorrected memory error(s) "
                    f"({', '.join(sorted(ue))}); first reading of this node: baseline recorded",
                    value=total, baseline=None, deviation="ue > 0",
                    rule="any uncorrected error (no previous reading)"))
            continue
        for name, v in values.items():
            if not isinstance(v, int):
                continue  # null: named above; anything else is no count
            code = code_of(name)
            if code is None:
                continue
            p = pvals.get(name)
            if not isinstance(p, int):
                continue  # new counter (or unread before): recorded, judged next time
            delta = v - p if v >= p else v  # fell: counted from zero again
            if delta <= 0:
                continue
            entry = mine.setdefault(code, [0, hours, []])
            entry[0] += delta
            entry[2].append(name)
        if mine:
            rises[node] = mine
    # a source a node's previous reading had and this one lacks: named on that node while
    # the partition's majority still has it (or the node is judged alone, as the gate does);
    # gone from most of a partition at once (a probe or driver change everywhere) it is one
    # note, not every node named
    for s, lost in sorted(gone.items()):
        what = _SOURCE_NAMES.get(s, s)
        if len(current) >= 3 and have_source.get(s, 0) * 2 <= len(current):
            notes.append(f"error counters: no {what} on {len(lost)} of {len(current)} nodes "
                         "now, their previous readings had them (changed on the whole "
                         "partition: not judged per node)")
            continue
        for node in lost:
            findings.append(Finding(
                "HC-CNT-UNKNOWN", node, f"{node}: no {what} now; its previous reading had "
                "them", rule="a counter source must stay readable", category=s.split("/")[0]))
    if partition_sources and len(current) >= 3:
        for s, n in sorted(have_source.items()):
            if n * 2 <= len(current):
                continue
            for node in sorted(current):
                pvals = (previous.get(node) or {}).get("values") or {}
                if s not in node_sources[node] and s not in _sources(pvals):
                    findings.append(Finding(
                        "HC-CNT-UNKNOWN", node, f"{node}: no {_SOURCE_NAMES.get(s, s)} on this "
                        f"node; {n} of {len(current)} nodes have them",
                        rule="a counter source the majority has", category=s.split("/")[0]))
    if first:
        notes.append(f"error counters: first reading of {len(first)} node(s), baseline "
                     "recorded (judged for uncorrected ECC errors only)")
    # corrected ECC: against the partition's median rate (nodes without a rise count 0)
    judged = [n for n in current if previous.get(n) is not None]
    ce_rates = {n: rises.get(n, {}).get("HC-ECC-CE", [0, 1.0])[0]
                / max(MIN_HOURS, rises.get(n, {}).get("HC-ECC-CE", [0, 1.0])[1])
                for n in judged}
    ce_median = median(list(ce_rates.values())) if ce_rates else 0.0
    for node in sorted(rises):
        prev = previous[node]
        assert prev is not None
        for code, (delta, hours, names) in sorted(rises[node].items()):
            rate = delta / max(hours, MIN_HOURS)
            limit = rules.limit(code)
            if code == "HC-ECC-CE":
                limit = max(limit, rules.ce_factor * ce_median)
                rule = (f"rate > max({rules.limit(code):g}/h, {rules.ce_factor:g} x partition "
                        f"median {ce_median:.3g}/h)")
            elif code == "HC-ECC-UE":
                rule = "any uncorrected error since the previous reading"
            else:
                rule = f"rate > {limit:g}/h" if limit else "any rise"
            if limit and rate <= limit:
                continue  # limit 0: any rise
            shown = ", ".join(sorted(names)[:4]) + (f" and {len(names) - 4} more"
                                                    if len(names) > 4 else "")
            findings.append(Finding(
                code, node, f"{node}: +{delta} in {_hours(hours)} ({rate:.3g}/h; {shown}) "
                f"since its previous reading ({prev.get('source', 'stored')})",
                value=delta, baseline=prev.get("source", "stored"),
                deviation=f"{rate:.3g}/h", rule=rule))
    return findings, notes


def _hours(h: float) -> str:
    return f"{h * 60:.0f} min" if h < 2 else f"{h:.1f} h"


def reading(values: Mapping[str, Any] | None, when: float) -> dict[str, Any] | None:
    return None if values is None else {"time": when, "values": dict(values)}


def previous_readings(vettings: list[dict[str, Any]], nodes: list[str],
                      health_dir: Path | None = None) -> dict[str, dict[str, Any] | None]:
    """node -> its latest stored reading (from the vettings, oldest first, and the
    health records in ``health_dir``), with ``source`` naming where it is from."""
    out: dict[str, dict[str, Any] | None] = {n: None for n in nodes}
    for v in vettings:
        for n, r in (v.get("counters") or {}).items():
            if (n in out and isinstance(r, dict) and isinstance(r.get("time"), (int, float))
                    and isinstance(r.get("values"), dict)):
                cur = out[n]
                if cur is None or r["time"] >= cur["time"]:
                    out[n] = {**r, "source": f"vet {v['id']}"}
    if health_dir is not None and health_dir.is_dir():
        latest: dict[str, Path] = {}
        # one node (hpcval health): its own records only, not every node's
        pattern = f"*-{glob.escape(nodes[0])}.json" if len(nodes) == 1 else "*.json"
        for p in health_dir.glob(pattern):
            node = p.stem[24:]  # <run id (23 characters)>-<node>
            if node in out and (node not in latest or p.name > latest[node].name):
                latest[node] = p
        for node, p in latest.items():
            try:
                trust.check_paths([p], "a stored health record the gate trusts")
                r = json.loads(p.read_text()).get("counters")
            except (OSError, ValueError, AttributeError):
                continue  # not a record of ours: the vettings' reading stands
            cur = out[node]
            if (isinstance(r, dict) and isinstance(r.get("time"), (int, float))
                    and isinstance(r.get("values"), dict)
                    and (cur is None or r["time"] >= cur["time"])):
                out[node] = {**r, "source": f"health {p.stem[:23]}"}
    return out
