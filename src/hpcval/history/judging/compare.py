"""Before and after: two sets of runs compared figure by figure, with intervals
(pure functions: no store, no ReFrame; docs/compare.md).

The model is the verdicts' (docs/judging.md): a figure's value in a run is the
median of its samples, judged on the log scale, and runs differ from each other
by more than their samples say. So a side's evidence is its **run medians**,
not its pooled samples. For every figure present on both sides:

* ``d = mean(log medians of B) - mean(log medians of A)``: the ratio B/A is
  ``exp(d)`` (a geometric-mean ratio);
* its standard error comes from the **between-run spread of both sides**
  (Welch: ``se^2 = s_A^2 / n_A + s_B^2 / n_B``, Welch-Satterthwaite degrees of
  freedom, Student's t from ``scipy.stats``). Where the site's run-to-run
  spread of the figure is known (``FigurePair.spread`` with ``spread_df``:
  its accepted runs on neither side), each side's variance is pooled with it,
  weighted by degrees of freedom: a few runs that happen to agree (drawn from
  one mode of a two-moded machine) cannot claim a spread the site's history
  contradicts, and a side whose own runs spread more still shows it. Each
  side's variance is floored at its runs' mean within-run variance of a
  median and at ``min_spread^2`` (runs that happened to agree cannot make an
  interval narrower than a median's own noise). Without the site's spread, a
  side with one run borrows the other side's spread (and its degrees of
  freedom): that assumes both sides spread alike. One run on each side has no
  interval at all.

Figures with one cause form a **family** (the verdicts' grouping,
:func:`hpcval.history.judging.families.families`). Each family gets one two-sided test:
Welch on each run's mean log median over the family's figures (turned to the
direction of its first figure), with the verdicts' split of the level (0.8 to
that averaged test, 0.2 to the family's smallest figure, Bonferroni), and Holm
corrects across the families. A family is

* ``worse`` / ``better``: its test passes at its Holm level;
* ``same``: not that, and every figure's interval at ``1 - 2 alpha`` lies
  inside ``+-margin`` (two one-sided tests per figure; all of them must pass,
  an intersection-union test, which needs no correction);
* ``inconclusive``: neither; ``needed`` says how many runs per side would make
  the interval ``+-margin`` wide at the measured spread.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpcval.core.errors import InputError
from hpcval.history.judging.change import Change
from hpcval.history.judging.families import families, holm, holm_levels
from hpcval.history.judging.figurestats import (
    MOST_RUNS,
    FigurePair,
    Welch,
    _aggregate,
    _ids,
    _medians,
    _paired,
    _prepare,
    _Prepared,
    _stats,
    runs_needed,
    runs_to_detect,
    welch,
)
from hpcval.history.judging.model import MEAN_SHARE, FigureData
from hpcval.history.judging.settings import JudgingSettings

#: re-exported: callers read them here
__all__ = ["FIGURE_LEVEL", "MOST_RUNS", "OUTCOMES", "FamilyComparison", "FigureComparison",
           "FigurePair", "RangeMean", "SetComparison", "Welch", "_Prepared", "_aggregate",
           "_ids", "_medians", "_paired", "_prepare", "_stats", "compare_sets", "runs_needed",
           "welch"]

OUTCOMES = ("worse", "better", "same", "inconclusive")
#: the confidence level of a figure's own interval (what bench/compare_coverage.py checks)
FIGURE_LEVEL = 0.95


@dataclass(frozen=True)
class FigureComparison:
    """One figure: the ratio B/A with its interval at ``FIGURE_LEVEL``."""

    name: str
    better: str
    unit: str
    size: float | None
    #: run medians of each side (natural scale), oldest first
    medians_a: tuple[float, ...]
    medians_b: tuple[float, ...]
    change: Change
    #: one-sided p of "worse" and of "better", and the two one-sided tests' p of "same"
    p_worse: float | None
    p_better: float | None
    p_same: float | None
    #: sd of the log run medians of each side, after the floors
    spread_a: float | None
    spread_b: float | None
    #: ``worse``/``better`` (named in a family that moved), ``same`` or ``inconclusive``
    outcome: str
    #: runs per side for a +-margin interval at this spread (None: unknown or too many)
    needed: int | None
    family: str = ""
    note: str = ""

    @property
    def ratio(self) -> float:
        return 1.0 + self.change.change

    @property
    def runs(self) -> tuple[int, int]:
        return len(self.medians_a), len(self.medians_b)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "better": self.better, "unit": self.unit, "size": self.size,
                "runs_a": len(self.medians_a), "runs_b": len(self.medians_b),
                "medians_a": list(self.medians_a), "medians_b": list(self.medians_b),
                "ratio": self.ratio, "change": self.change.change, "ci_low": self.change.low,
                "ci_high": self.change.high, "ci_level": self.change.level,
                "p_worse": self.p_worse, "p_better": self.p_better, "p_same": self.p_same,
                "spread_a": self.spread_a, "spread_b": self.spread_b,
                "outcome": self.outcome, "needed_runs": self.needed, "family": self.family,
                "note": self.note, "text": self.change.text()}


@dataclass(frozen=True)
class FamilyComparison:
    """One family: its outcome, the mean change of its figures at the decision's level."""

    name: str
    case: str
    figures: tuple[str, ...]
    outcome: str
    change: Change
    p_adjusted: float | None
    needed: int | None
    runs: tuple[int, int]
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.case} {self.name}".strip() if self.case else self.name

    def as_dict(self) -> dict[str, Any]:
        return {"family": self.name, "case": self.case, "figures": list(self.figures),
                "outcome": self.outcome, "change": self.change.change,
                "ci_low": self.change.low, "ci_high": self.change.high,
                "ci_level": self.change.level, "p_adjusted": self.p_adjusted,
                "needed_runs": self.needed, "runs_a": self.runs[0], "runs_b": self.runs[1],
                "note": self.note, "text": self.change.text()}


@dataclass(frozen=True)
class RangeMean:
    """The mean change of a family's figures over a range of message sizes."""

    family: str
    case: str
    low: float
    high: float
    sizes: tuple[float, ...]
    change: Change

    def as_dict(self) -> dict[str, Any]:
        return {"family": self.family, "case": self.case, "low": self.low, "high": self.high,
                "sizes": list(self.sizes), "change": self.change.change,
                "ci_low": self.change.low, "ci_high": self.change.high,
                "ci_level": self.change.level, "text": self.change.text()}


@dataclass
class SetComparison:
    """Everything :func:`compare_sets` found."""

    figures: dict[str, FigureComparison]
    families: list[FamilyComparison]
    ranges: list[RangeMean] = field(default_factory=list)
    margin: float = 0.05
    alpha: float = 0.05

    @property
    def outcome(self) -> str:
        """``worse`` if any family is, else ``better`` if any is, ``same`` if all
        are, else ``inconclusive``."""
        got = {f.outcome for f in self.families}
        for o in ("worse", "better"):
            if o in got:
                return o
        return "same" if got == {"same"} else "inconclusive"

    @property
    def has_interval(self) -> bool:
        return any(f.change.has_interval for f in self.figures.values())

    def as_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "margin": self.margin, "alpha": self.alpha,
                "families": [f.as_dict() for f in self.families],
                "figures": [f.as_dict() for f in self.figures.values()],
                "ranges": [r.as_dict() for r in self.ranges]}


def _case_of(key: str) -> str:
    return key.rsplit("/", 1)[0] if "/" in key else ""


def compare_sets(figures: Mapping[str, FigurePair], settings: JudgingSettings | None = None,
                 margin: float = 0.05, size_range: tuple[float, float] | None = None,
                 ) -> SetComparison:
    """Compare side B with side A for every figure of ``figures`` (keyed
    ``"<case>/<variable>"`` as the verdicts name them): per-figure ratios with
    intervals, one test per family, Holm across families, and (with
    ``size_range``) each family's mean change over the sizes in that range."""
    settings = settings or JudgingSettings()
    if not 0 < margin < 1:
        raise InputError(f"--margin {margin:g}: must be between 0 and 1 (e.g. 0.05 for 5 %)")
    if not figures:
        raise InputError("compare: no figure is on both sides")
    alpha = settings.alpha
    prepared = {k: _prepare(k, p, settings.for_figure(k).min_spread) for k, p in figures.items()}
    datas = {k: FigureData([], [1.0], p.better, p.unit) for k, p in figures.items()}
    groups = families(datas, settings)
    # one two-sided test per family: the averaged test (MEAN_SHARE of the level)
    # or the family's smallest figure (the rest, Bonferroni), as the verdicts split it
    fam_rows: list[dict[str, Any]] = []
    for (case, name), keys in groups.items():
        members = [prepared[k] for k in keys]
        sign = [1.0 if m.pair.better == members[0].pair.better else -1.0 for m in members]
        agg = _aggregate(members, sign) if len(members) > 1 else members[0].welch
        row: dict[str, Any] = {"case": case, "name": name, "keys": keys, "agg": agg,
                               "members": members, "p": None, "dir": None}
        if agg is not None and agg.se is not None:
            p_low = [agg.p_lower()] + [m.welch.p_lower() for m in members]
            p_high = [agg.p_higher()] + [m.welch.p_higher() for m in members]
            p_low_f = _split(p_low[0], [_turned(p, s) for p, s in zip(p_low[1:], sign,
                                                                          strict=True)])
            p_high_f = _split(p_high[0], [_turned(p, s) for p, s in zip(p_high[1:], sign,
                                                                             strict=True)])
            row["p"] = min(1.0, 2 * min(p_low_f, p_high_f))
            row["dir"] = "lower" if p_low_f <= p_high_f else "higher"
        fam_rows.append(row)
    tested = [r for r in fam_rows if r["p"] is not None]
    adjusted = holm([r["p"] for r in tested])
    levels = holm_levels([r["p"] for r in tested], alpha)
    for r, pa, lv in zip(tested, adjusted, levels, strict=True):
        r["p_adj"], r["level"] = pa, lv
    out_figs: dict[str, FigureComparison] = {}
    out_fams: list[FamilyComparison] = []
    for r in fam_rows:
        members, keys = r["members"], r["keys"]
        first_better = members[0].pair.better
        moved = r["p"] is not None and r["p_adj"] < alpha
        # which figures moved: Holm within the family at the family's level
        named: set[str] = set()
        if moved:
            ps = [(m.welch.p_lower() if r["dir"] == "lower" else m.welch.p_higher()) or 1.0
                  for m in members]
            within = holm_levels(ps, 1.0)
            named = {k for k, p, w in zip(keys, ps, within, strict=True)
                     if p < r["level"] / 2 * w}
            if not named:  # the averaged test moved: every figure that moved that way
                named = {k for k, m in zip(keys, members, strict=True)
                         if ((m.welch.diff < 0) == (r["dir"] == "lower"))}
        all_same = True
        for k, m in zip(keys, members, strict=True):
            fc = _figure(k, m, margin, alpha, r["name"] if len(keys) > 1 else "",
                         k in named, r["dir"])
            out_figs[k] = fc
            all_same = all_same and fc.p_same is not None and fc.p_same < alpha
        agg: Welch | None = r["agg"]
        runs = (min(len(m.ma) for m in members), min(len(m.mb) for m in members))
        if moved:
            worse = (r["dir"] == "lower") == (first_better == "higher")
            outcome, lvl = ("worse" if worse else "better"), 1 - r["level"]
        elif all_same:
            outcome, lvl = "same", 1 - 2 * alpha
        else:
            outcome, lvl = "inconclusive", FIGURE_LEVEL
        note = ""
        if agg is None:
            change = Change(math.nan)
            note = "no run has every figure of the family on both sides"
        else:
            ci = agg.interval(lvl)
            change = Change.from_log(agg.diff, *(ci or (None, None)),
                                     level=lvl if ci else None)
            if ci is None:
                note = _one_run_note(members, margin, agg.diff)
        # `same` needs every figure inside the margin: the family needs what its
        # noisiest figure needs (None: one of them needs more than MOST_RUNS or
        # its spread is unknown)
        each = [out_figs[k].needed for k in keys]
        needed = None if any(n is None for n in each) else max(each)  # type: ignore[type-var]
        seen = agg.diff if agg is not None else math.nan
        if (outcome == "inconclusive" and not note and agg is not None and agg.var_a
                and agg.var_b and abs(seen) >= math.log1p(margin)):
            n = runs_to_detect(agg.var_a, agg.var_b, seen)
            seen_pct = f"{100 * math.expm1(seen):+.1f} %"
            note = (f"{n} runs per side would tell whether this {seen_pct} is real (`worse` "
                    "or `better`) at this spread" if n else
                    f"the spread is too wide to tell this {seen_pct} from noise within "
                    f"{MOST_RUNS} runs per side")
        if outcome == "inconclusive" and not note:
            note = (f"{needed} runs per side would answer `same` within +-{margin:.0%} (in 80 % "
                    "of comparisons where nothing changed) at this spread" if needed else
                    f"the spread is too wide for a +-{margin:.0%} answer within {MOST_RUNS} "
                    "runs per side")
        out_fams.append(FamilyComparison(r["name"], r["case"], tuple(keys), outcome, change,
                                         r.get("p_adj"), needed, runs, note))
    ranges = _ranges(groups, prepared, size_range) if size_range else []
    order = {o: i for i, o in enumerate(OUTCOMES)}
    out_fams.sort(key=lambda f: (order[f.outcome], f.label))
    return SetComparison(out_figs, out_fams, ranges, margin, alpha)


def _turned(p: float | None, sign: float) -> float:
    """A member's one-sided p turned to the family's direction (sign -1: flipped)."""
    if p is None:
        return 1.0
    return p if sign > 0 else 1.0 - p


def _split(p_mean: float | None, p_figures: Sequence[float]) -> float:
    """The verdicts' family p: the averaged test with ``MEAN_SHARE`` of the
    level, or the smallest figure with the rest (Bonferroni over the figures)."""
    n = len(p_figures)
    if n == 1 or p_mean is None:
        return float(min(p_figures)) if n == 1 else 1.0
    return min(1.0, p_mean / MEAN_SHARE, n * min(p_figures) / (1 - MEAN_SHARE))


def _one_run_note(members: Sequence[_Prepared], margin: float,
                  diff: float | None = None) -> str:
    """What one run per side cannot say, and the runs per side that would: a
    `same` answer where the runs differ by less than the margin, else whether
    the difference seen is real (`worse` or `better`)."""
    spreads = [m.pair.spread for m in members if m.pair.spread]
    text = "one run per side: no interval"
    if spreads:
        v = float(np.median(spreads)) ** 2
        text += _needed_text(v, v, margin, diff, f"the site's run-to-run spread of "
                             f"{math.expm1(math.sqrt(v)):.1%}")
    return text


def _needed_text(var_a: float, var_b: float, margin: float, diff: float | None,
                 at: str) -> str:
    if diff is not None and math.isfinite(diff) and abs(diff) >= math.log1p(margin):
        n = runs_to_detect(var_a, var_b, diff)
        return (f"; {n} runs per side would tell whether this {100 * math.expm1(diff):+.1f} "
                f"% is real (`worse` or `better`) at {at}" if n else "")
    n = runs_needed(var_a, var_b, margin)
    return f"; {n} runs per side would answer `same` within +-{margin:.0%} at {at}" if n else ""


def _figure(key: str, m: _Prepared, margin: float, alpha: float, family: str,
            named: bool, direction: str | None) -> FigureComparison:
    w = m.welch
    ci = w.interval(FIGURE_LEVEL)
    change = Change.from_log(w.diff, *(ci or (None, None)), level=FIGURE_LEVEL if ci else None)
    p_low, p_high = w.p_lower(), w.p_higher()
    p_worse, p_better = (p_low, p_high) if m.pair.better == "higher" else (p_high, p_low)
    p_same = w.p_equivalent(margin)
    if named:
        worse = (direction == "lower") == (m.pair.better == "higher")
        outcome = "worse" if worse else "better"
    elif p_same is not None and p_same < alpha:
        outcome = "same"
    else:
        outcome = "inconclusive"
    needed = None
    note = ""
    if w.var_a is not None and w.var_b is not None:
        needed = runs_needed(w.var_a, w.var_b, margin, alpha)
    elif m.pair.spread:
        needed = runs_needed(m.pair.spread ** 2, m.pair.spread ** 2, margin, alpha)
    if ci is None:
        note = _one_run_note([m], margin, w.diff)
    return FigureComparison(
        name=key, better=m.pair.better, unit=m.pair.unit, size=m.pair.size,
        medians_a=tuple(float(math.exp(v)) for v in m.ma),
        medians_b=tuple(float(math.exp(v)) for v in m.mb), change=change,
        p_worse=p_worse, p_better=p_better, p_same=p_same,
        spread_a=math.sqrt(w.var_a) if w.var_a is not None else None,
        spread_b=math.sqrt(w.var_b) if w.var_b is not None else None,
        outcome=outcome, needed=needed, family=family, note=note)


def _ranges(groups: Mapping[tuple[str, str], list[str]], prepared: Mapping[str, _Prepared],
            size_range: tuple[float, float]) -> list[RangeMean]:
    low, high = size_range
    out = []
    for (case, name), keys in groups.items():
        inside = [k for k in keys if prepared[k].pair.size is not None
                  and low <= float(prepared[k].pair.size) <= high]  # type: ignore[arg-type]
        if not inside:
            continue
        members = [prepared[k] for k in inside]
        sign = [1.0 if m.pair.better == members[0].pair.better else -1.0 for m in members]
        agg = _aggregate(members, sign)
        if agg is None:
            continue
        ci = agg.interval(FIGURE_LEVEL)
        change = Change.from_log(agg.diff, *(ci or (None, None)),
                                 level=FIGURE_LEVEL if ci else None)
        sizes = tuple(sorted(float(m.pair.size) for m in members))  # type: ignore[arg-type]
        out.append(RangeMean(name, case, low, high, sizes, change))
    return out
