"""Judge nodes and links against their own partition: outliers, not thresholds.

Pure functions on measured samples; no Slurm, no files. Every figure of a node
(or of a node pair) is the median of its samples; a node is judged against the
population of its partition with the median and the normal-consistent median
absolute deviation (``scipy.stats.median_abs_deviation``), the robust z score of
Iglewicz and Hoaglin. A node is named only when it is worse than the population
both *statistically* (robust z beyond ``z``) and *practically* (by more than
``min_effect`` of the median), so a tight population does not turn 2 % into an
alarm and a noisy one does not hide a 50 % loss.

Pairs: the bandwidth of a pair is bounded by the slower of its two ends (and by
the link between them). A node's score is the median of its pairs: low when
most pairs containing the node are low, untouched by one slow peer. Nodes are
judged on their scores; then every pair is judged against the pairs between
unnamed nodes, and a low pair whose ends are both fine points at the link.
Where Slurm's topology is known, a switch whose nodes are low towards the rest
of the partition, or most of whose nodes are named, is named as the switch.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from hpcval.vet.model import FIGURES as FIGURES
from hpcval.vet.model import INFORMATIONAL as INFORMATIONAL
from hpcval.vet.model import PAIR_BW as PAIR_BW
from hpcval.vet.model import Culprit as Culprit
from hpcval.vet.model import Deviation as Deviation
from hpcval.vet.model import FigureSpec as FigureSpec
from hpcval.vet.model import JudgeSettings as JudgeSettings
from hpcval.vet.model import Verdict as Verdict
from hpcval.vet.ranks import (
    _group_median,
    _Groups,
    _median,
    _Pool,
)
from hpcval.vet.ranks import exact_rank_cdf as exact_rank_cdf
from hpcval.vet.ranks import median as median
from hpcval.vet.ranks import rank_test as rank_test
from hpcval.vet.ranks import robust_center_scale as robust_center_scale
from hpcval.vet.schedule import Pair


def deviations(values: Mapping[str, float], spec: FigureSpec, settings: JudgeSettings,
               center: float | None = None, scale: float | None = None,
               counts: Mapping[str, int] | None = None,
               samples: Mapping[str, Sequence[float]] | None = None,
               pool: Sequence[float] | None = None,
               both: bool = False,
               others_of: Callable[[str], list[float]] | None = None,
               pool_excluding: Mapping[str, Sequence[float]] | None = None,
               exact: bool = False,
               ) -> dict[str, Deviation]:
    """Each value next to the population's median (or a given center/scale).

    Off = worse than ``min_effect`` *and* statistically off: robust z beyond
    ``settings.z``, or, where samples are given, a one-sided Mann-Whitney test of
    the key's samples against the others' (or ``pool``; with ``pool_excluding``,
    the pool less the key's values listed there) significant at
    ``settings.alpha`` after a Bonferroni correction over all keys. The rank test
    catches a clear loss in a noisy population, where ten medians estimate the
    spread too loosely for z alone; the effect size keeps it from naming noise.
    With ``both``, z *and* the rank test must agree (per-node figures: a node
    whose samples scatter as widely as everyone's is not named for one low
    summary).

    Computed over all keys at once: the pool is sorted once and every key that
    needs a rank test is ranked against it together (thousands of nodes or
    pairs in seconds). With ``exact`` (per-node figures, the samples of each
    key against everyone's), the rank test from 2,000 others on is the exact
    tail (:func:`exact_rank_cdf`), not the normal approximation.
    """
    keys = list(values)
    v = np.fromiter((values[k] for k in keys), dtype=float, count=len(keys))
    if center is None or scale is None:
        center, scale = robust_center_scale(v, settings.scale_floor, spec.better)
    if center == 0:
        worse = np.zeros(len(keys))
    else:
        rel = (v - center) / abs(center)
        worse = -rel if spec.better == "higher" else rel
    z = worse * abs(center) / scale
    big = worse > settings.effect(spec)
    low = (z > settings.z) & big
    p: list[float | None] = [None] * len(keys)
    tested: list[int] = []
    if samples is not None:
        tested = [i for i in range(len(keys))
                  if big[i] and (both or not low[i]) and len(samples.get(keys[i], ())) >= 3]
    if both:  # z and the rank test must agree: an untested key is not named
        untested = np.ones(len(keys), dtype=bool)
        untested[tested] = False
        low[untested] = False
    if tested:
        assert samples is not None
        mine = [samples[keys[i]] for i in tested]
        if others_of is not None:
            got: list[float | None] = []
            for i in tested:
                others = others_of(keys[i])
                got.append(rank_test(samples[keys[i]], others, spec.better)
                           if len(others) >= 3 else None)
        elif pool is not None:
            excl = ([pool_excluding.get(keys[i], ()) for i in tested]
                    if pool_excluding is not None else None)
            got = _Pool(pool).p_values(mine, excl, spec.better)
        else:
            every = [x for s in samples.values() for x in s]
            got = _Pool(every).p_values(mine, mine, spec.better, exact=exact)
        for i, pv in zip(tested, got, strict=True):
            if pv is None:
                continue  # fewer than 3 others: the z verdict stands
            p[i] = pv
            significant = pv * len(values) < settings.alpha
            low[i] = (low[i] and significant) if both else significant
    cnt = counts or {}
    vl, cl, wl, zl, ll = v.tolist(), float(center), worse.tolist(), z.tolist(), low.tolist()
    return {k: Deviation(vl[i], cl, wl[i], zl[i], ll[i], cnt.get(k, 0), p[i])
            for i, k in enumerate(keys)}


def _fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def judge_node_figure(samples: Mapping[str, Sequence[float]], spec: FigureSpec,
                      settings: JudgeSettings, verdict: Verdict, judged: bool = True) -> None:
    """A per-node figure (triad, shared-memory PingPong, CPU frequency); with
    ``judged`` False only shown next to the population, never named."""
    values = {n: spec.of(s) for n, s in samples.items() if s}
    missing = [n for n in verdict.nodes if n not in values]
    for n in missing:
        verdict.notes.append(f"{n}: no {spec.label} samples")
    if len(values) < settings.min_nodes:
        verdict.notes.append(
            f"{spec.label}: {len(values)} node(s) measured, fewer than {settings.min_nodes}: "
            "too few to judge against each other")
        for n, v in values.items():
            verdict.table.setdefault(n, {})[spec.name] = Deviation(
                v, v, 0.0, 0.0, False, len(samples[n]))
        return
    devs = deviations(values, spec, settings, counts={n: len(s) for n, s in samples.items()},
                      samples=samples, both=True, exact=True)
    for n, d in devs.items():
        if not judged:
            d.low = False
        verdict.table.setdefault(n, {})[spec.name] = d
        if d.low:
            verdict.culprits.append(Culprit(
                "node", n, spec.name,
                f"{n}: {spec.label} {_fmt(d.value)} {spec.unit} ({spec.summary} of {d.samples} "
                f"samples), {abs(d.worse_by) * 100:.0f} % worse than the partition median "
                f"{_fmt(d.center)} {spec.unit} (robust z {d.z:.1f}; its samples below the "
                f"others', rank test p {d.p:.1g})", [n]))


def judge_pairs(nodes: Sequence[str], samples: Mapping[Pair, Sequence[float]],
                spec: FigureSpec, settings: JudgeSettings, verdict: Verdict,
                topology: Mapping[str, str] | None = None,
                may_name: set[str] | None = None) -> None:
    """A pair figure (PingPong bandwidth between two nodes): nodes, links, switches.
    With ``may_name``, only those nodes may be named as nodes (the others' low
    pairs are then judged as links).

    Explaining away: a pair with a named peer, or one that leaves a named switch,
    says nothing about the node at its other end, so node scores are computed
    again without such pairs until the named set stops changing.

    Every step is computed over all nodes and pairs at once: a pair is an index
    into arrays of its two ends, its switches and its median; a node's pairs are
    its incidences (each pair counted at both ends).
    """
    keys = [p for p, s in samples.items() if s]
    index: dict[str, int] = {}
    for a, b in keys:
        index.setdefault(a, len(index))
        index.setdefault(b, len(index))
    names = list(index)
    lens = {len(samples[p]) for p in keys}
    if len(lens) == 1:
        v_arr = np.median(np.array([samples[p] for p in keys], dtype=float), axis=1)
    else:
        v_arr = np.array([median(samples[p]) for p in keys], dtype=float)
    if len(names) < settings.min_nodes:
        verdict.judged = False
        verdict.notes.append(
            f"{spec.label}: {len(names)} node(s) in pairs, fewer than {settings.min_nodes}: "
            "too few to tell a slow node from a slow link or a slow peer (a pair only says "
            "that one of its ends or the link is slow)")
        for p, v in zip(keys, v_arr.tolist(), strict=True):
            verdict.pairs[f"{p[0]}|{p[1]}"] = Deviation(v, v, 0.0, 0.0, False, len(samples[p]))
        return
    topo = topology or {}
    n_nodes, n_pairs = len(names), len(keys)
    a_idx = np.array([index[a] for a, _ in keys], dtype=np.int64)
    b_idx = np.array([index[b] for _, b in keys], dtype=np.int64)
    # switches: index per distinct name; -1 (and a last entry that is never bad) for none
    sw_names = sorted({s for s in (topo.get(n) for n in names) if s is not None})
    sw_index = {s: i for i, s in enumerate(sw_names)}
    swi = np.array([sw_index.get(topo.get(n), -1) for n in names], dtype=np.int64)  # type: ignore[arg-type]
    sw_a, sw_b = swi[a_idx], swi[b_idx]
    cross = sw_a != sw_b
    inc_node = np.concatenate([a_idx, b_idx])
    inc_other = np.concatenate([b_idx, a_idx])
    inc_pair = np.concatenate([np.arange(n_pairs), np.arange(n_pairs)])
    inc_cross = np.concatenate([cross, cross])
    s_me, s_other = swi[inc_node], swi[inc_other]
    sw_ctx = _Switches(names, swi, sw_names, topology, a_idx, b_idx, v_arr)
    named = np.zeros(n_nodes, dtype=bool)
    bad_sw = np.zeros(len(sw_names) + 1, dtype=bool)
    switches: list[Culprit] = []
    node_devs: dict[str, Deviation] = {}
    scores: dict[str, float] = {}
    for _ in range(4):
        explained = named[inc_other] | (inc_cross & (bad_sw[s_me] | bad_sw[s_other]))
        unexplained = np.bincount(inc_node[~explained], minlength=n_nodes)
        use = ~explained | (unexplained[inc_node] == 0)  # all explained: all of them
        u_node, u_val = inc_node[use], v_arr[inc_pair[use]]
        score_arr = _group_median(u_node, u_val, n_nodes)
        used_count = np.bincount(u_node, minlength=n_nodes)
        clean_now = ~named[a_idx] & ~named[b_idx] & ~(cross & (bad_sw[sw_a] | bad_sw[sw_b]))
        # the yardstick of a score: at least the spread a median of k pairs has
        # when pairs scatter as the clean pairs do (samples of one pair share
        # their minute of load, so the pairs, not the samples, are the units)
        center, scale = robust_center_scale(score_arr, settings.scale_floor, spec.better)
        if int(clean_now.sum()) >= 3:
            _, pair_scale = robust_center_scale(v_arr[clean_now], settings.scale_floor,
                                                spec.better)
            k = _median(used_count)
            scale = max(scale, 1.253 * pair_scale / math.sqrt(k))
        # the rank test of a node: its pairs against the clean pairs it is not in
        clean_inc = clean_now[inc_pair]
        scores = dict(zip(names, score_arr.tolist(), strict=True))
        node_devs = deviations(
            scores, spec, settings, center=center, scale=scale,
            counts=dict(zip(names, used_count.tolist(), strict=True)),
            samples=_Groups(names, u_node, u_val),
            pool=v_arr[clean_now],
            pool_excluding=_Groups(names, inc_node[clean_inc], v_arr[inc_pair[clean_inc]]))
        new_named = np.array([node_devs[n].low and (may_name is None or n in may_name)
                              for n in names], dtype=bool)
        # a switch once named stays named (its slow pairs are explained by it, so
        # its nodes may look fine afterwards); nodes are judged afresh each time
        found = {c.name: c for c in sw_ctx.judge(new_named, spec, settings, bad_sw)}
        switches = [c for c in switches if c.name not in found] + list(found.values())
        new_sw = bad_sw.copy()
        for name in found:
            new_sw[sw_index[name]] = True
        if np.array_equal(new_named, named) and np.array_equal(new_sw, bad_sw):
            break
        named, bad_sw = new_named, new_sw
    for n, d in node_devs.items():
        verdict.table.setdefault(n, {})[spec.name] = d

    clean = ~named[a_idx] & ~named[b_idx] & ~(cross & (bad_sw[sw_a] | bad_sw[sw_b]))
    base = v_arr[clean] if int(clean.sum()) >= 3 else v_arr
    center, scale = robust_center_scale(base, settings.scale_floor, spec.better)
    pair_keys = [f"{a}|{b}" for a, b in keys]
    clean_list = clean.tolist()
    clean_pool = [x for p, c in zip(keys, clean_list, strict=True) if c for x in samples[p]]
    pair_devs = deviations(dict(zip(pair_keys, v_arr.tolist(), strict=True)), spec, settings,
                           center=center, scale=scale,
                           counts={f"{a}|{b}": len(s) for (a, b), s in samples.items()},
                           samples={f"{a}|{b}": s for (a, b), s in samples.items()},
                           pool=clean_pool if len(clean_pool) >= 3 else None)
    verdict.pairs.update(pair_devs)
    pair_low = np.array([pair_devs[k].low for k in pair_keys], dtype=bool)

    switches.sort(key=lambda c: c.name)
    in_switch = {n for sw in switches for n in sw.nodes}
    named_set = {names[i] for i in np.flatnonzero(named)}
    for n in sorted(named_set - in_switch, key=lambda n: node_devs[n].value):
        i = index[n]
        mine = (a_idx == i) | (b_idx == i)
        n_mine, n_low = int(mine.sum()), int((mine & pair_low).sum())
        peers = v_arr[clean & ~mine]
        d = node_devs[n]
        verdict.culprits.append(Culprit(
            "node", n, spec.name,
            f"{n}: {spec.label} {_fmt(d.value)} {spec.unit} (median of its {n_mine} pairs), "
            f"low in {n_low} of {n_mine} pairs; pairs of healthy nodes: median "
            f"{_fmt(_median(peers)) if len(peers) else '-'} {spec.unit}", [n]))
    verdict.culprits += switches
    for j in sorted(np.flatnonzero(pair_low & clean).tolist(), key=lambda j: v_arr[j]):
        a, b = keys[j]
        d = pair_devs[pair_keys[j]]
        verdict.culprits.append(Culprit(
            "link", f"{a}<->{b}", spec.name,
            f"{a}<->{b}: {spec.label} {_fmt(d.value)} {spec.unit} (median of {d.samples} "
            f"samples), {abs(d.worse_by) * 100:.0f} % below the pairs of healthy nodes "
            f"(median {_fmt(d.center)} {spec.unit}); {a} median "
            f"{_fmt(scores[a])}, {b} median {_fmt(scores[b])} with their other peers",
            []))


class _Switches:
    """Switches whose pairs to other switches are slow, or most of whose nodes are
    named, over the arrays of :func:`judge_pairs`."""

    def __init__(self, names: list[str], swi: np.ndarray, sw_names: list[str],
                 topology: Mapping[str, str] | None, a_idx: np.ndarray, b_idx: np.ndarray,
                 v_arr: np.ndarray) -> None:
        self.names, self.swi, self.sw_names = names, swi, sw_names
        self.members: dict[str, list[int]] = defaultdict(list)
        if topology:
            for i, n in enumerate(names):
                if n in topology:
                    self.members[topology[n]].append(i)
        self.a_idx, self.b_idx, self.v_arr = a_idx, b_idx, v_arr
        sa, sb = swi[a_idx], swi[b_idx]
        truthy = np.array([bool(s) for s in sw_names] + [False])
        # pairs between two named (non-empty) switches, leaving one for the other
        self.leave = truthy[sa] & truthy[sb] & (sa != sb)
        self.sa, self.sb = sa, sb

    def judge(self, named: np.ndarray, spec: FigureSpec, settings: JudgeSettings,
              bad_sw: np.ndarray) -> list[Culprit]:
        if len(self.members) < 2:
            return []
        # pairs that leave each switch (between unnamed nodes), judged against the
        # other switches' leaving pairs; a pair into a switch already named says
        # nothing about the switch at its other end
        ok = self.leave & ~named[self.a_idx] & ~named[self.b_idx]
        to_a = ok & ~bad_sw[self.sb]
        to_b = ok & ~bad_sw[self.sa]
        group = np.concatenate([self.sa[to_a], self.sb[to_b]])
        vals = np.concatenate([self.v_arr[to_a], self.v_arr[to_b]])
        n_sw = len(self.sw_names)
        med = _group_median(group, vals, n_sw)
        count = np.bincount(group, minlength=n_sw)
        judged = {self.sw_names[s]: float(med[s]) for s in np.flatnonzero(count >= 3)}
        sw_devs = (deviations(judged, spec, settings) if len(judged) >= 3 else {})
        out = []
        for sw, idx in sorted(self.members.items()):
            n_named = int(named[idx].sum())
            d = sw_devs.get(sw)
            mostly = len(idx) >= 2 and n_named >= 2 and n_named >= math.ceil(len(idx) / 2)
            if (d is not None and d.low) or mostly:
                why = []
                if d is not None and d.low:
                    why.append(f"pairs leaving {sw}: median {_fmt(d.value)} {spec.unit}, "
                               f"{abs(d.worse_by) * 100:.0f} % below other switches' "
                               f"({_fmt(d.center)} {spec.unit})")
                why.append(f"{n_named} of its {len(idx)} nodes low on their own")
                out.append(Culprit("switch", sw, spec.name, f"switch {sw}: " + "; ".join(why),
                                   sorted(self.names[i] for i in idx)))
        return out


def judge_audit(findings: Mapping[str, Sequence[Mapping[str, object]]],
                settings: JudgeSettings, verdict: Verdict) -> None:
    """Host tuning audit: a setting that misses the site's expectation names the
    node; so does a value that differs from what most of the partition has."""
    values: dict[str, dict[str, str]] = defaultdict(dict)
    for node, items in findings.items():
        bad = [f for f in items if f.get("status") in ("mismatch", "unknown")]
        for f in items:
            values[str(f["setting"])][node] = str(f.get("found"))
        if bad:
            verdict.culprits.append(Culprit(
                "node", node, "tuning",
                f"{node}: tuning audit: " + "; ".join(
                    f"{f['setting']} found {f.get('found')!r}, expected {f.get('expected')}"
                    for f in bad), [node]))
    if len(findings) < settings.min_nodes:
        return
    for setting, per_node in sorted(values.items()):
        common, count = Counter(per_node.values()).most_common(1)[0]
        if count < math.ceil(2 * len(per_node) / 3):
            continue
        for node, v in sorted(per_node.items()):
            if v != common:
                verdict.culprits.append(Culprit(
                    "node", node, "tuning",
                    f"{node}: {setting} is {v!r}; {count} of {len(per_node)} nodes have "
                    f"{common!r}", [node]))


def judge_references(verdict: Verdict, specs: Mapping[str, FigureSpec],
                     floors: Mapping[str, tuple[float, str]],
                     settings: JudgeSettings | None = None) -> None:
    """Against the site's references. A node worse than the site's bound is named
    only when it is also an outlier of its partition (``low`` in the table): a
    bound is a contract for the partition, and a node just below it among peers
    just above it is the partition's spread, not a fault. Nodes below the bound
    that are not outliers are one finding about the partition, as is a partition
    whose median is worse than the bound, or within the figure's ``min_effect``
    of it (near the bound, the spread alone puts nodes on both sides)."""
    settings = settings or JudgeSettings()
    for fig, (bound, source) in floors.items():
        spec = specs[fig]
        vals = {n: figs[fig] for n, figs in verdict.table.items() if fig in figs}
        if not vals:
            continue
        center = median([d.value for d in vals.values()])
        where = f"the site's bound {_fmt(bound)} {spec.unit} ({source})"
        if spec.worse(center, bound) > 0:
            verdict.partition.append(
                f"{spec.label}: partition median {_fmt(center)} {spec.unit} is worse than "
                f"{where}: the whole partition, not one node")
            continue
        below = sorted(n for n, d in vals.items() if spec.worse(d.value, bound) > 0)
        for n in below:
            d = vals[n]
            if d.low:
                verdict.culprits.append(Culprit(
                    "node", n, fig, f"{n}: {spec.label} {_fmt(d.value)} {spec.unit} is worse "
                    f"than {where}, and an outlier of its partition", [n]))
        plain = [n for n in below if not vals[n].low]
        near = -spec.worse(center, bound) <= settings.effect(spec)
        if plain or near:
            shown = ", ".join(plain[:5]) + (f" and {len(plain) - 5} more" if len(plain) > 5
                                            else "")
            verdict.partition.append(
                f"{spec.label}: partition median {_fmt(center)} {spec.unit}"
                + (f", within {settings.effect(spec) * 100:.0f} % of {where}" if near
                   else f" against {where}")
                + (f"; {len(plain)} node(s) below it, none an outlier of the partition "
                   f"({shown}): the partition's spread, not one node" if plain else ""))
