"""Sets of stored runs for ``hpcval compare``: which runs a side means, and
their figures as :class:`hpcval.history.judging.compare.FigurePair` s.

A side is one of (docs/compare.md):

* ``RUN[,RUN...]``: run ids as ``hpcval history`` lists them;
* ``tag:KEY=VALUE[,KEY=VALUE...]``: the runs validated with those tags
  (``hpcval validate --tag KEY=VALUE``);
* ``baseline``: the accepted baseline, per figure the last ``k`` accepted runs
  in which it was measured (what the verdicts judge a new run against);
* ``all``: every stored run.

Any of them is narrowed by a time range (``--a-since``/``--a-until``, UTC,
``2026-11-20`` or ``2026-11-20T14:00``) and by where the cases ran
(``--a-partition``, ``--a-environ``): with ``--a-environ impi --b-environ
openmpi`` the same check on the same nodes is compared across MPI stacks.
Runs nobody would compare never belong to a side: interrupted ones, orphaned
ones (their hpcval died: never judged) and those a person rejected (``hpcval
history --reject``); :class:`Sides` says which were left out and why.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np

from hpcval.core.errors import InputError
from hpcval.history.judging.compare import FigurePair
from hpcval.history.judging.model import pooled_spread
from hpcval.history.judging.settings import JudgingSettings
from hpcval.history.store import HistoryPoint, Store

_CASE_RE = re.compile(r"^(?P<name>.*)@(?P<system>[^@:]*):(?P<partition>[^@+]*)\+(?P<environ>.*)$")
_SIZE_RE = re.compile(r"_(\d+(?:\.\d+)?)([KMGT]i?)?B$")
_FACTORS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_TAG_RE = re.compile(r"^[A-Za-z0-9_.-]+$")


def parse_tag(text: str, what: str = "--tag") -> tuple[str, str]:
    """``nic=gvnic`` -> ("nic", "gvnic")."""
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if sep and value and not value.isprintable():
        raise InputError(f"{what} {text!r}: the value holds a control character (a newline, "
                         "a tab...); write it on one line of printable characters")
    if not sep or not _TAG_RE.match(key) or not value:
        raise InputError(f"{what} {text!r}: write KEY=VALUE, the key of letters, digits, "
                         "'_', '.' or '-' (e.g. --tag nic=gvnic)")
    return key, value


def parse_time(text: str, what: str) -> float:
    """A UTC date or date and time as a Unix time."""
    try:
        when = datetime.fromisoformat(text.strip().replace(" ", "T"))
    except ValueError:
        raise InputError(f"{what} {text!r}: not a time; write a UTC date or date and time, "
                         "e.g. 2026-11-20 or 2026-11-20T14:00") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def size_of(variable: str) -> float | None:
    """The message size a figure's name ends with: ``bw_1MiB`` -> 1048576, ``lat_8B`` -> 8."""
    m = _SIZE_RE.search(variable)
    if not m:
        return None
    unit = (m.group(2) or "")[:1].upper()
    return float(m.group(1)) * _FACTORS[unit]


def split_case(case_key: str) -> dict[str, str]:
    """A case key's parts: name (check and parameters), system, partition, environ."""
    m = _CASE_RE.match(case_key)
    if not m:
        return {"name": case_key, "system": "", "partition": "", "environ": ""}
    return m.groupdict()


@dataclass
class Side:
    """One side of a comparison as given on the command line."""

    label: str
    spec: str
    since: float | None = None
    until: float | None = None
    partition: str | None = None
    environ: str | None = None
    #: what the spec selected
    run_ids: list[str] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    baseline: bool = False

    @classmethod
    def parse(cls, label: str, spec: str, since: str | None = None, until: str | None = None,
              partition: str | None = None, environ: str | None = None) -> Side:
        opt = f"--{label.lower()}"
        side = cls(label, spec,
                   parse_time(since, f"{opt}-since") if since else None,
                   parse_time(until, f"{opt}-until") if until else None,
                   partition or None, environ or None)
        text = spec.strip()
        if text == "baseline":
            side.baseline = True
        elif text == "all":
            pass
        elif text.startswith("tag:"):
            for part in text[4:].split(","):
                k, v = parse_tag(part, f"side {label} ({spec!r})")
                side.tags[k] = v
        else:
            ids = [t.strip() for t in text.split(",") if t.strip()]
            if not ids:
                raise InputError(f"side {label}: empty; give run ids (RUN,RUN), tag:KEY=VALUE, "
                                 "baseline or all")
            side.run_ids = ids
        if side.since is not None and side.until is not None and side.since > side.until:
            raise InputError(f"{opt}-since is after {opt}-until")
        return side

    def describe(self) -> str:
        parts = [self.spec]
        if self.since is not None:
            parts.append("since " + _utc(self.since))
        if self.until is not None:
            parts.append("until " + _utc(self.until))
        if self.partition:
            parts.append(f"partition {self.partition}")
        if self.environ:
            parts.append(f"environ {self.environ}")
        return ", ".join(parts)


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def run_tags(run: Mapping[str, Any]) -> dict[str, str]:
    """The tags a stored run was validated with (kept in its provenance)."""
    try:
        prov = json.loads(run.get("provenance") or "{}")
    except ValueError:
        return {}
    tags = prov.get("tags") if isinstance(prov, dict) else None
    return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, dict) else {}


#: why a run a side would hold is left out, by its result
LEFT_OUT = {"interrupted": "interrupted", "orphaned": "orphaned (never judged)"}
#: why a run a person rejected is left out
REJECTED = "rejected (hpcval history --reject)"


def select_runs(side: Side, runs: Sequence[Mapping[str, Any]],
                rejected: Collection[str] = (),
                left_out: dict[str, str] | None = None) -> list[str]:
    """The stored run ids a side means, oldest first (for ``baseline``: the
    accepted runs, of which each figure takes its last ``k``). Interrupted and
    orphaned runs and the *rejected* ones are not taken: each that the side
    would have held is put in *left_out* with why."""
    dropped: dict[str, str] = {}
    known = {r["run_id"]: r for r in runs}
    if side.run_ids is not None:
        missing = [i for i in side.run_ids if i not in known]
        if missing:
            raise InputError(f"side {side.label}: no stored run {missing[0]!r} (see "
                             "`hpcval history` for the run ids)")
        chosen = [r for r in runs if r["run_id"] in set(side.run_ids)]
    else:
        chosen = list(runs)
    out = []
    for r in chosen:
        if side.baseline and not r["accepted"]:
            continue
        started = r.get("started")
        if side.since is not None and (started is None or started < side.since):
            continue
        if side.until is not None and (started is None or started > side.until):
            continue
        tags = run_tags(r)
        if any(tags.get(k) != v for k, v in side.tags.items()):
            continue
        why = LEFT_OUT.get(r["result"]) or (REJECTED if r["run_id"] in rejected else None)
        if why is not None:
            dropped[r["run_id"]] = why
            continue
        out.append(r["run_id"])
    if left_out is not None:
        left_out.update(dropped)
    if not out:
        also = f"; {left_out_text(dropped)}" if dropped else ""
        raise InputError(f"side {side.label} ({side.describe()}): no stored run matches "
                         f"(`hpcval history` lists the runs and their tags){also}")
    return out


def left_out_text(left_out: Mapping[str, str]) -> str:
    """``left out 2 run(s) nobody would compare: 1 orphaned (never judged) (RUN),
    1 rejected (hpcval history --reject) (RUN)``: one line."""
    by_why: dict[str, list[str]] = {}
    for run_id, why in left_out.items():
        by_why.setdefault(why, []).append(run_id)
    parts = [f"{len(ids)} {why} ({', '.join(sorted(ids)[:3])}{', ...' if len(ids) > 3 else ''})"
             for why, ids in sorted(by_why.items())]
    return f"left out {len(left_out)} run(s) nobody would compare: {'; '.join(parts)}"


@dataclass
class Sides:
    """Both sides resolved: the figures to compare and what each side holds."""

    figures: dict[str, FigurePair]
    runs_a: list[str]
    runs_b: list[str]
    only_a: list[str]
    only_b: list[str]
    #: runs the sides would have held that no comparison takes, with why
    left_out: dict[str, str] = field(default_factory=dict)


def _match_key(case_key: str, variable: str, drop_partition: bool, drop_environ: bool,
               ) -> tuple[str, str, str, str, str]:
    c = split_case(case_key)
    return (c["name"], c["system"], "" if drop_partition else c["partition"],
            "" if drop_environ else c["environ"], variable)


def _name(a: dict[str, str], b: dict[str, str], variable: str) -> str:
    """``<check>@<system>:<partition>+<environ>/<variable>``, a part that differs
    between the sides written ``A vs B``."""
    def part(key: str) -> str:
        return a[key] if a[key] == b[key] else f"{a[key]} vs {b[key]}"
    return f"{a['name']}@{part('system')}:{part('partition')}+{part('environ')}/{variable}"


def _side_points(side: Side, ids: list[str], points: Sequence[HistoryPoint],
                 settings: JudgingSettings, drop_p: bool, drop_e: bool, check: str | None,
                 ) -> dict[tuple[str, ...], list[HistoryPoint]]:
    chosen = set(ids)
    out: dict[tuple[str, ...], list[HistoryPoint]] = {}
    for p in points:
        if p.run_id not in chosen or not p.measured or not p.samples:
            continue
        c = split_case(p.case_key)
        if side.partition and c["partition"] != side.partition:
            continue
        if side.environ and c["environ"] != side.environ:
            continue
        if check and not c["name"].startswith(check):
            continue
        out.setdefault(_match_key(p.case_key, p.variable, drop_p, drop_e), []).append(p)
    for key, pts in out.items():
        seen: dict[str, str] = {}
        for p in pts:
            if p.run_id in seen:
                where = "environment" if drop_e else "partition"
                raise InputError(
                    f"side {side.label}: run {p.run_id} has {key[0]}/{key[4]} in more than "
                    f"one {where} ({seen[p.run_id]}, {p.case_key}); choose one with "
                    f"--{side.label.lower()}-{'environ' if drop_e else 'partition'}")
            seen[p.run_id] = p.case_key
    if side.baseline:
        for key, pts in out.items():
            k = settings.for_figure(f"{pts[-1].case_key}/{pts[-1].variable}").k
            out[key] = pts[-k:]
    return out


def _spread(history: Sequence[HistoryPoint], settings: JudgingSettings, name: str,
            compared: Collection[str] = ()) -> tuple[float | None, int]:
    """The site's run-to-run spread of a figure and its degrees of freedom: sd of
    the log run medians of its accepted runs other than the ``compared`` ones
    (the verdicts' window), ``(None, 0)`` below 3 runs."""
    fs = settings.for_figure(name)
    meds = [math.log(float(np.median(p.samples))) for p in history
            if p.accepted and p.measured and p.samples and min(p.samples) > 0
            and p.run_id not in compared]
    meds = meds[-fs.spread_runs:]
    if len(meds) < 3:
        return None, 0
    sd, df, _ = pooled_spread(meds)
    return (None, 0) if math.isnan(sd) else (max(sd, fs.min_spread), df)


def resolve(store: Store, a: Side, b: Side, settings: JudgingSettings,
            check: str | None = None) -> Sides:
    """Both sides' figures from the store, matched by check, parameters, system,
    partition and environment (the last two only where neither side selects one)."""
    runs = store.runs()
    rejected = {r for r, h in store.holds().items() if h.get("state") == "rejected"}
    left_out: dict[str, str] = {}
    ids_a = select_runs(a, runs, rejected, left_out)
    ids_b = select_runs(b, runs, rejected, left_out)
    # sides that select other cases (Intel MPI against Open MPI, one partition
    # against another) may share runs: each run then gives both sides a figure
    other_cases = ((a.environ or b.environ) and a.environ != b.environ) or (
        (a.partition or b.partition) and a.partition != b.partition)
    if not other_cases:
        # the baseline never holds the runs it is compared with
        if a.baseline:
            ids_a = [i for i in ids_a if i not in set(ids_b)]
        if b.baseline:
            ids_b = [i for i in ids_b if i not in set(ids_a)]
        both = sorted(set(ids_a) & set(ids_b))
        if both:
            raise InputError(f"run {both[0]} is on both sides ({len(both)} run(s) in all) and "
                             "both sides select the same cases: a run compared with itself "
                             "says nothing; narrow a side")
    if not ids_a or not ids_b:
        raise InputError(f"side {'A' if not ids_a else 'B'}: no run left once the runs of "
                         "the other side are taken out")
    points = store.history()
    drop_p = bool(a.partition or b.partition)
    drop_e = bool(a.environ or b.environ)
    pa = _side_points(a, ids_a, points, settings, drop_p, drop_e, check)
    pb = _side_points(b, ids_b, points, settings, drop_p, drop_e, check)
    by_series: dict[tuple[str, str], list[HistoryPoint]] = {}
    for p in points:
        by_series.setdefault((p.case_key, p.variable), []).append(p)
    figures: dict[str, FigurePair] = {}
    compared = set(ids_a) | set(ids_b)
    for key in sorted(k for k in pa if k in pb):
        xa, xb = pa[key], pb[key]
        name = _name(split_case(xa[0].case_key), split_case(xb[0].case_key), key[4])
        hist = by_series.get((xa[0].case_key, key[4]), [])
        figures[name] = FigurePair(
            [p.samples for p in xa], [p.samples for p in xb], xb[0].better, xb[0].unit,
            size_of(key[4]), [p.run_id for p in xa], [p.run_id for p in xb],
            *_spread(hist, settings, f"{xa[0].case_key}/{key[4]}", compared))
    if not figures:
        raise InputError(
            f"no figure is on both sides (A: {a.describe()}, {len(pa)} figure(s); B: "
            f"{b.describe()}, {len(pb)} figure(s)); for different partitions or MPI stacks "
            "name them with --a-partition/--b-partition or --a-environ/--b-environ")
    used_a = sorted({r for f in figures.values() for r in f.a_ids})
    used_b = sorted({r for f in figures.values() for r in f.b_ids})
    order = {r: i for i, r in enumerate(x["run_id"] for x in runs)}
    return Sides(figures, sorted(used_a, key=order.__getitem__),
                 sorted(used_b, key=order.__getitem__),
                 sorted("/".join((k[0], k[4])) for k in pa if k not in pb),
                 sorted("/".join((k[0], k[4])) for k in pb if k not in pa), left_out)
