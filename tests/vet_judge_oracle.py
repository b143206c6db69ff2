"""The judging of `hpcval vet` as it was before it was vectorised (hpcval.vet.judge
up to commit db7d6f6), kept only as the oracle of tests/unit/test_vet_judge_equal.py:
the vectorised judging must give the same verdicts on the same samples. Not part
of the package; nothing else imports it."""
from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from hpcval.core.figures import check_direction, unit_direction, worse_change
from hpcval.vet.schedule import Pair


@dataclass(frozen=True)
class FigureSpec:
    """What a figure is and how far off it may be before it counts."""

    name: str
    label: str
    unit: str
    better: str  # "higher" or "lower"
    #: smallest relative deviation (worse side) that names a node
    min_effect: float
    #: how samples make the figure: "median", or "best" for a capacity that
    #: interference only ever lowers (STREAM reports its best repetition too)
    summary: str = "median"

    def __post_init__(self) -> None:
        check_direction(self.better, f"vet figure {self.name}")
        if unit_direction(self.unit) not in (None, self.better):
            raise ValueError(f"vet figure {self.name}: {self.unit} is better {self.better}?")

    def of(self, samples: Sequence[float]) -> float:
        if self.summary == "best":
            return float(max(samples) if self.better == "higher" else min(samples))
        return median(samples)

    def worse(self, value: float, center: float) -> float:
        """Relative deviation towards 'worse' (0.3 = 30 % worse than center)."""
        if center == 0:
            return 0.0
        return worse_change((value - center) / abs(center), self.better)


#: The figures ``hpcval vet`` measures.
PAIR_BW = FigureSpec("pingpong_bw_1MiB", "PingPong 1 MiB", "MB/s", "higher", 0.15)
FIGURES: dict[str, FigureSpec] = {f.name: f for f in (
    PAIR_BW,
    FigureSpec("triad_bw", "triad", "MB/s", "higher", 0.25, "best"),
    FigureSpec("shm_pingpong_bw_1MiB", "shared-memory PingPong 1 MiB", "MB/s", "higher", 0.30,
               "best"),
    FigureSpec("shm_pingpong_lat_8B", "shared-memory PingPong 8 B", "us", "lower", 1.0),
    FigureSpec("cpu_mhz", "CPU frequency", "MHz", "higher", 0.10),
)}


#: Recorded and shown, never judged: shared-memory latency on nodes whose cores are
#: shared (the lab) is the scheduler's time slice, not the node (docs/vet.md).
INFORMATIONAL = {"shm_pingpong_lat_8B"}


@dataclass
class JudgeSettings:
    #: robust z beyond which a figure is statistically off
    z: float = 3.5
    #: fewer nodes than this cannot be judged against each other
    min_nodes: int = 4
    #: the robust scale is at least this fraction of the median (a population
    #: measured to 0.1 % would otherwise call every 1 % an outlier)
    scale_floor: float = 0.02
    #: family-wise error rate of the rank test (Bonferroni over the population)
    alpha: float = 0.01
    #: per-figure override of FigureSpec.min_effect
    min_effect: dict[str, float] = field(default_factory=dict)

    def effect(self, spec: FigureSpec) -> float:
        return self.min_effect.get(spec.name, spec.min_effect)


@dataclass
class Deviation:
    """One figure of one node (or pair) next to its population."""

    value: float
    center: float
    worse_by: float  # relative, towards worse
    z: float  # robust z, towards worse (positive = worse)
    low: bool
    samples: int = 0
    #: Bonferroni-uncorrected p of the rank test, where it was needed
    p: float | None = None

    def percent(self) -> str:
        return f"{-self.worse_by * 100:+.0f} %"


@dataclass
class Culprit:
    kind: str  # node, link, switch
    name: str
    figure: str
    evidence: str
    nodes: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    """Everything the judging found; JSON-ready through :meth:`to_dict`."""

    nodes: list[str]
    #: node -> figure -> deviation
    table: dict[str, dict[str, Deviation]] = field(default_factory=dict)
    #: "a|b" -> deviation of the pair figure
    pairs: dict[str, Deviation] = field(default_factory=dict)
    culprits: list[Culprit] = field(default_factory=list)
    #: findings about the whole partition (below a site reference everywhere)
    partition: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judged: bool = True

    @property
    def named_nodes(self) -> list[str]:
        named: list[str] = []
        for c in self.culprits:
            for n in c.nodes:
                if n not in named:
                    named.append(n)
        return named

    def to_dict(self) -> dict:
        return {
            "nodes": self.nodes, "judged": self.judged,
            "table": {n: {f: asdict(d) for f, d in figs.items()}
                      for n, figs in self.table.items()},
            "pairs": {k: asdict(d) for k, d in self.pairs.items()},
            "culprits": [asdict(c) for c in self.culprits],
            "named_nodes": self.named_nodes,
            "partition": self.partition, "notes": self.notes,
        }


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def robust_center_scale(values: Sequence[float], floor: float,
                        better: str | None = None) -> tuple[float, float]:
    """Median and normal-consistent MAD (at least ``floor`` x |median|).

    With ``better`` given, the MAD of the better half only (the "double MAD"
    for skewed populations): faults only ever push a figure to the worse side,
    so many slow nodes must not widen the yardstick that judges them.
    """
    center = median(values)
    pool = list(values)
    if better is not None:
        side = [v for v in values if (v >= center if better == "higher" else v <= center)]
        pool = side + [2 * center - v for v in side]  # mirrored: symmetric around center
    from scipy.stats import median_abs_deviation  # scipy is imported only to judge

    scale = float(median_abs_deviation(pool, scale="normal")) if len(pool) > 1 else 0.0
    return center, max(scale, floor * abs(center), 1e-12)


def deviations(values: Mapping[str, float], spec: FigureSpec, settings: JudgeSettings,
               center: float | None = None, scale: float | None = None,
               counts: Mapping[str, int] | None = None,
               samples: Mapping[str, Sequence[float]] | None = None,
               pool: Sequence[float] | None = None,
               both: bool = False,
               others_of: Callable[[str], list[float]] | None = None,
               ) -> dict[str, Deviation]:
    """Each value next to the population's median (or a given center/scale).

    Off = worse than ``min_effect`` *and* statistically off: robust z beyond
    ``settings.z``, or, where samples are given, a one-sided Mann-Whitney test of
    the key's samples against the others' (or ``pool``) significant at
    ``settings.alpha`` after a Bonferroni correction over all keys. The rank test
    catches a clear loss in a noisy population, where ten medians estimate the
    spread too loosely for z alone; the effect size keeps it from naming noise.
    With ``both``, z *and* the rank test must agree (per-node figures: a node
    whose samples scatter as widely as everyone's is not named for one low
    summary).
    """
    if center is None or scale is None:
        center, scale = robust_center_scale(list(values.values()), settings.scale_floor,
                                            spec.better)
    out = {}
    for key, v in values.items():
        worse = spec.worse(v, center)
        z = worse * abs(center) / scale
        big = worse > settings.effect(spec)
        low = z > settings.z and big
        p = None
        if big and (both or not low) and samples is not None and len(samples.get(key, ())) >= 3:
            if others_of is not None:
                others = others_of(key)
            elif pool is not None:
                others = list(pool)
            else:
                others = [x for k, s in samples.items() if k != key for x in s]
            if len(others) >= 3:
                p = rank_test(samples[key], others, spec.better)
                significant = p * len(values) < settings.alpha
                low = (low and significant) if both else significant
        elif both:
            low = False
        out[key] = Deviation(v, center, worse, z, low, (counts or {}).get(key, 0), p)
    return out


def rank_test(mine: Sequence[float], others: Sequence[float], better: str) -> float:
    """One-sided Mann-Whitney p that ``mine`` is worse than ``others``: scipy's
    (exact where it can be) for small pools, the normal approximation with a
    sorted pool for large ones (thousands of pairs in a simulated partition)."""
    import numpy as np
    from scipy.stats import mannwhitneyu, norm

    if len(others) < 2000:
        alt = "less" if better == "higher" else "greater"
        return float(mannwhitneyu(mine, others, alternative=alt).pvalue)
    pool = np.sort(np.asarray(others, dtype=float))
    x = np.asarray(mine, dtype=float)
    below = np.searchsorted(pool, x, side="left")
    ties = np.searchsorted(pool, x, side="right") - below
    u = float(np.sum(below + 0.5 * ties))  # pairs where mine > other
    n1, n2 = len(x), len(pool)
    mu, sigma = n1 * n2 / 2, math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    z = (u - mu) / sigma
    return float(norm.cdf(z) if better == "higher" else norm.sf(z))


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
                      samples=samples, both=True)
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
                topology: Mapping[str, str] | None = None) -> None:
    """A pair figure (PingPong bandwidth between two nodes): nodes, links, switches.

    Explaining away: a pair with a named peer, or one that leaves a named switch,
    says nothing about the node at its other end, so node scores are computed
    again without such pairs until the named set stops changing.
    """
    values = {p: median(s) for p, s in samples.items() if s}
    by_node: dict[str, list[Pair]] = defaultdict(list)
    for p in values:
        by_node[p[0]].append(p)
        by_node[p[1]].append(p)
    if len(by_node) < settings.min_nodes:
        verdict.judged = False
        verdict.notes.append(
            f"{spec.label}: {len(by_node)} node(s) in pairs, fewer than {settings.min_nodes}: "
            "too few to tell a slow node from a slow link or a slow peer (a pair only says "
            "that one of its ends or the link is slow)")
        for p, v in values.items():
            verdict.pairs[f"{p[0]}|{p[1]}"] = Deviation(v, v, 0.0, 0.0, False, len(samples[p]))
        return
    topo = topology or {}
    named: set[str] = set()
    bad_sw: set[str] = set()
    switches: list[Culprit] = []
    for _ in range(4):
        used = {n: [p for p in ps if not _explained(p, n, named, bad_sw, topo)] or ps
                for n, ps in by_node.items()}
        scores = {n: median([values[p] for p in ps]) for n, ps in used.items()}
        clean_now = [p for p in values if not (set(p) & named) and not any(
            _explained(p, e, set(), bad_sw, topo) for e in p)]
        # the yardstick of a score: at least the spread a median of k pairs has
        # when pairs scatter as the clean pairs do (samples of one pair share
        # their minute of load, so the pairs, not the samples, are the units)
        center, scale = robust_center_scale(list(scores.values()), settings.scale_floor,
                                            spec.better)
        if len(clean_now) >= 3:
            _, pair_scale = robust_center_scale([values[p] for p in clean_now],
                                                settings.scale_floor, spec.better)
            k = median([len(ps) for ps in used.values()])
            scale = max(scale, 1.253 * pair_scale / math.sqrt(k))
        # the rank test of a node: its pairs against the pairs it is not in
        node_pairs = {n: [values[p] for p in ps] for n, ps in used.items()}

        def others_of(n: str, clean_now: list[Pair] = clean_now) -> list[float]:
            return [values[p] for p in clean_now if n not in p]

        node_devs = deviations(scores, spec, settings, center=center, scale=scale,
                               counts={n: len(ps) for n, ps in used.items()},
                               samples=node_pairs, others_of=others_of)
        new_named = {n for n, d in node_devs.items() if d.low}
        # a switch once named stays named (its slow pairs are explained by it, so
        # its nodes may look fine afterwards); nodes are judged afresh each time
        found = {c.name: c for c in _judge_switches(values, new_named, node_devs, spec,
                                                     settings, topology, bad_sw)}
        switches = [c for c in switches if c.name not in found] + list(found.values())
        new_sw = bad_sw | set(found)
        if new_named == named and new_sw == bad_sw:
            break
        named, bad_sw = new_named, new_sw
    for n, d in node_devs.items():
        verdict.table.setdefault(n, {})[spec.name] = d

    def clean(p: Pair) -> bool:
        return not (set(p) & named) and not (
            topo.get(p[0]) != topo.get(p[1])
            and (topo.get(p[0]) in bad_sw or topo.get(p[1]) in bad_sw))

    base = [v for p, v in values.items() if clean(p)]
    if len(base) < 3:
        base = list(values.values())
    center, scale = robust_center_scale(base, settings.scale_floor, spec.better)
    clean_pool = [x for p, s in samples.items() if p in values and clean(p) for x in s]
    pair_devs = deviations({f"{a}|{b}": v for (a, b), v in values.items()}, spec, settings,
                           center=center, scale=scale,
                           counts={f"{a}|{b}": len(s) for (a, b), s in samples.items()},
                           samples={f"{a}|{b}": s for (a, b), s in samples.items()},
                           pool=clean_pool if len(clean_pool) >= 3 else None)
    verdict.pairs.update(pair_devs)

    switches.sort(key=lambda c: c.name)
    in_switch = {n for sw in switches for n in sw.nodes}
    for n in sorted(named - in_switch, key=lambda n: node_devs[n].value):
        mine = by_node[n]
        low = [p for p in mine if pair_devs[f"{p[0]}|{p[1]}"].low]
        peers = [v for p, v in values.items() if n not in p and clean(p)]
        d = node_devs[n]
        verdict.culprits.append(Culprit(
            "node", n, spec.name,
            f"{n}: {spec.label} {_fmt(d.value)} {spec.unit} (median of its {len(mine)} pairs), "
            f"low in {len(low)} of {len(mine)} pairs; pairs of healthy nodes: median "
            f"{_fmt(median(peers)) if peers else '-'} {spec.unit}", [n]))
    verdict.culprits += switches
    for key, d in sorted(pair_devs.items(), key=lambda kv: kv[1].value):
        a, b = key.split("|")
        if d.low and clean((a, b)):
            verdict.culprits.append(Culprit(
                "link", f"{a}<->{b}", spec.name,
                f"{a}<->{b}: {spec.label} {_fmt(d.value)} {spec.unit} (median of {d.samples} "
                f"samples), {abs(d.worse_by) * 100:.0f} % below the pairs of healthy nodes "
                f"(median {_fmt(d.center)} {spec.unit}); {a} median "
                f"{_fmt(scores[a])}, {b} median {_fmt(scores[b])} with their other peers",
                []))


def _explained(p: Pair, me: str, named: set[str], bad_sw: set[str],
               topo: Mapping[str, str]) -> bool:
    """Pair ``p`` of node ``me`` is explained by its named peer or a named switch."""
    other = p[1] if p[0] == me else p[0]
    if other in named:
        return True
    s_me, s_other = topo.get(me), topo.get(other)
    return s_me != s_other and (s_me in bad_sw or s_other in bad_sw)


def _judge_switches(values: Mapping[Pair, float], named: set[str],
                    node_devs: Mapping[str, Deviation], spec: FigureSpec,
                    settings: JudgeSettings, topology: Mapping[str, str] | None,
                    bad_sw: set[str]) -> list[Culprit]:
    """Switches whose pairs to other switches are slow, or most of whose nodes are named."""
    if not topology:
        return []
    members: dict[str, list[str]] = defaultdict(list)
    for n in node_devs:
        if n in topology:
            members[topology[n]].append(n)
    if len(members) < 2:
        return []
    # pairs that leave each switch (between unnamed nodes), judged against the
    # other switches' leaving pairs; a pair into a switch already named says
    # nothing about the switch at its other end
    leaving: dict[str, list[float]] = defaultdict(list)
    for (a, b), v in values.items():
        sa, sb = topology.get(a), topology.get(b)
        if sa and sb and sa != sb and a not in named and b not in named:
            if sb not in bad_sw:
                leaving[sa].append(v)
            if sa not in bad_sw:
                leaving[sb].append(v)
    out = []
    judged = {s: median(v) for s, v in leaving.items() if len(v) >= 3}
    sw_devs = (deviations(judged, spec, settings) if len(judged) >= 3 else {})
    for sw, nodes in sorted(members.items()):
        n_named = sum(1 for n in nodes if n in named)
        d = sw_devs.get(sw)
        mostly = len(nodes) >= 2 and n_named >= 2 and n_named >= math.ceil(len(nodes) / 2)
        if (d is not None and d.low) or mostly:
            why = []
            if d is not None and d.low:
                why.append(f"pairs leaving {sw}: median {_fmt(d.value)} {spec.unit}, "
                           f"{abs(d.worse_by) * 100:.0f} % below other switches' "
                           f"({_fmt(d.center)} {spec.unit})")
            why.append(f"{n_named} of its {len(nodes)} nodes low on their own")
            out.append(Culprit("switch", sw, spec.name, f"switch {sw}: " + "; ".join(why),
                               sorted(nodes)))
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
                     floors: Mapping[str, tuple[float, str]]) -> None:
    """Against the site's references: a node worse than the site's bound is named
    unless the whole partition is (then it is the partition, said once)."""
    for fig, (bound, source) in floors.items():
        spec = specs[fig]
        vals = {n: figs[fig] for n, figs in verdict.table.items() if fig in figs}
        if not vals:
            continue
        center = median([d.value for d in vals.values()])
        if spec.worse(center, bound) > 0:
            verdict.partition.append(
                f"{spec.label}: partition median {_fmt(center)} {spec.unit} is worse than the "
                f"site's bound {_fmt(bound)} {spec.unit} ({source}): the whole partition, "
                "not one node")
            continue
        for n, d in sorted(vals.items()):
            if spec.worse(d.value, bound) > 0:
                verdict.culprits.append(Culprit(
                    "node", n, fig, f"{n}: {spec.label} {_fmt(d.value)} {spec.unit} is worse "
                    f"than the site's bound {_fmt(bound)} {spec.unit} ({source})", [n]))
