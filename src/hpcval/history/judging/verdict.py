"""Judging one run's figures against their history.

The model (docs/judging.md). A figure's value in run ``i`` is the median of its
samples; on the log scale

    m_i = mu + b_i + w_i,   b_i ~ N(0, sigma_b^2)  (between runs: load, placement, cache)
                            w_i ~ N(0, v_i)        (the median's within-run noise)

Samples inside one run share ``b_i``, so the current run's median is judged
against the spread of run medians, not against pooled samples:

* the **level** is the mean of the last ``k`` accepted runs' log medians;
* the **spread** ``s`` (sd of log run medians) comes from the last
  ``spread_runs`` accepted runs (30 by default), pooled within the levels a
  person accepted (a new level restarts the mean, not the count), with one
  outlying run left out (beyond 4.5 robust sds); its degrees of freedom are the
  runs it came from minus the levels;
* the current run's own within-run variance ``v_c`` widens the interval when it
  is larger than the baseline's typical ``v_bar``:

    var_pred = max(s^2 - v_bar, 0) + max(v_c, v_bar) + s^2 / k
    T = (m_c - level) / sqrt(var_pred)  ~  t(df)  under "no change"

Figures that share a cause form a **family** (by default the figures of one test
case with the same unit and direction: its bandwidths, its latencies). Each
family gets one test: the figures' one-sided p-values as normal scores, averaged,
with the variance of that mean from the family's run-to-run correlation measured
on the same window (Stouffer's method for correlated tests). Holm corrects
across the run's families; a figure of a family that moved is ``regressed`` when
its own test passes at the family's level and it is worse by the threshold. A
figure whose interval, at the level of the decision, lies wholly beyond the
threshold is ``regressed`` whatever its family says.

**Stability**: each run's within-run dispersion (MAD of the log samples) is
judged against the same window's: ``unstable`` when it grew by the factor
``unstable`` (3x) and significantly (t on the log dispersions, Holm across the
figures).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hpcval.core.errors import InputError
from hpcval.history.judging.settings import FigureSettings, JudgingSettings


def _stats():  # noqa: ANN202 - scipy.stats, imported when a figure is judged
    """``scipy.stats``, imported on first use: a run whose figures have no
    baseline yet (every new site) never pays for importing it."""
    from scipy import stats

    return stats


OUTCOMES = ("pass", "regressed", "unstable", "improved", "warn", "inconclusive", "no-baseline")
BETTER = ("higher", "lower")
#: Scale factor from the MAD to the standard deviation of a normal distribution.
MAD_TO_SD = 1.4826
#: Variance of a sample median relative to the mean's, for normal data (pi/2).
MEDIAN_EFFICIENCY = math.pi / 2
#: A run whose median lies further than this many sds of the other runs from its
#: level is left out of the spread (one bad run must not widen every later interval).
OUTLIER_SDS = 4.5
#: Variance of log(MAD) of n normal samples is about this / n (the MAD's 37 %
#: efficiency): the floor of the dispersion test's spread.
LOG_MAD_VAR = 1.35
#: Share of a family's level given to the averaged test; the rest goes to its
#: smallest figure alone (a cause that moves one figure far).
MEAN_SHARE = 0.8
#: Units of time and of rate: the default family names.
TIME_UNITS = ("s", "ms", "us", "ns", "µs", "min", "h")


class Needed(NamedTuple):
    """What would resolve the threshold at this noise (``None``: no amount would).

    ``runs``: consecutive runs at this level to combine, judged against a
    baseline of at least as many runs (what the sustained-change rule does);
    ``baseline_runs``: K for a single run to resolve it; ``samples``: samples
    per run for a single run (``None`` when the between-run spread alone is too
    wide: more samples cannot help, only more runs); ``threshold``: the smallest
    change one run resolves at this noise (the threshold to set instead)."""

    runs: int | None
    baseline_runs: int | None
    samples: int | None
    threshold: float | None = None


@dataclass(frozen=True)
class FigureVerdict:
    """The verdict on one figure of one run."""

    outcome: str
    better: str
    baseline_median: float | None
    current_median: float | None
    #: relative change current / baseline - 1 (negative: smaller value)
    change: float | None
    #: interval of ``change`` at ``ci_level`` (the level the decision used)
    ci_low: float | None
    ci_high: float | None
    #: the figure's own one-sided p-value in the direction of the change, and
    #: its family's p after the correction across the run's families
    p_value: float | None
    p_adjusted: float | None
    #: what would resolve the threshold (filled unless no-baseline)
    needed: Needed | None
    note: str
    threshold: float
    baseline_runs: int
    samples: int
    #: the family the figure was judged in ("" when alone)
    family: str = ""
    #: run-to-run spread (sd of log run medians) and the runs it came from
    spread: float | None = None
    spread_runs: int = 0
    #: runs the level came from (the last k)
    level_runs: int = 0
    #: within-run log-MAD: {"current", "baseline", "ratio"}
    dispersion: dict[str, float] | None = None
    #: confidence level of [ci_low, ci_high]
    ci_level: float | None = None

    @property
    def worse_by(self) -> float | None:
        """The change in the figure's worse direction (positive: worse)."""
        if self.change is None:
            return None
        return -self.change if self.better == "higher" else self.change


class FigureData(NamedTuple):
    """One figure of a run as ``judge_run`` takes it.

    ``baseline_runs``: samples of the accepted runs of the spread window (the
    last ``spread_runs``), oldest first; the level comes from the last ``k``.
    ``level_starts``: indexes into ``baseline_runs`` where a new level a person
    accepted begins (the spread is pooled within levels). ``unit`` groups the
    default families."""

    baseline_runs: Sequence[Sequence[float]]
    current: Sequence[float]
    better: str
    unit: str = ""
    level_starts: Sequence[int] = ()


@dataclass(frozen=True)
class _Assessment:
    """Test statistics before the decision (the correction needs all figures)."""

    better: str
    settings: FigureSettings
    scale: str  # "log" or "linear"
    base_level: float
    cur_level: float
    diff: float  # cur - base on the scale
    se: float  # sqrt(var_pred)
    df: int
    p_worse: float
    p_better: float
    between_var: float
    within_var_current: float
    baseline_runs: int
    samples: int
    baseline_median: float
    current_median: float
    spread: float
    spread_runs: int
    #: log run medians of the window (for the family's correlation), oldest first
    medians: tuple[float, ...] = ()
    #: dispersion test: (current, baseline typical, ratio, one-sided p)
    dispersion: tuple[float, float, float, float] | None = None
    family: str = ""


def _check_values(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise InputError(f"{what}: no samples; a judged figure needs at least one")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{what}: samples must be finite numbers, got {values!r}")
    return arr


def _mad_sd(x: np.ndarray) -> float:
    return MAD_TO_SD * float(np.median(np.abs(x - np.median(x))))


def _median_var(x: np.ndarray) -> float:
    """Variance of the median of ``x`` (robust: from the MAD); nan if < 2 samples."""
    if x.size < 2:
        return math.nan
    sd = _mad_sd(x)
    if sd == 0.0:
        sd = float(np.std(x, ddof=1))
    return MEDIAN_EFFICIENCY * sd * sd / x.size


def pooled_spread(medians: Sequence[float], level_starts: Sequence[int] = ()
                  ) -> tuple[float, int, int]:
    """Run-to-run spread of ``medians`` (log run medians, oldest first): the sd of
    their deviations from the mean of their level (levels begin at
    ``level_starts``), leaving out one run beyond ``OUTLIER_SDS`` sds of the others
    when there are at least 10. Returns ``(sd, degrees of freedom, runs used)``;
    ``(nan, 0, n)`` when no level has two runs."""
    x = np.asarray(medians, dtype=float)
    edges = sorted({0, *[i for i in level_starts if 0 < i < x.size], x.size})
    segments = [x[a:b] for a, b in zip(edges, edges[1:], strict=False) if b - a >= 2]
    if not segments:
        return math.nan, 0, int(x.size)
    dev = np.concatenate([s - s.mean() for s in segments])
    df = dev.size - len(segments)
    if dev.size >= 10:
        worst = int(np.argmax(np.abs(dev)))
        # the sd of the other runs (a MAD from few runs is too rough: it left out
        # plain runs of normal data)
        rest = (float(np.sum(dev * dev)) - float(dev[worst]) ** 2) / max(df - 1, 1)
        if rest > 0 and abs(dev[worst]) > OUTLIER_SDS * math.sqrt(rest):
            # leave that run out and re-centre its level
            keep = np.ones(x.size, dtype=bool)
            owner = np.concatenate([np.arange(a, b) for a, b in zip(edges, edges[1:],
                                                                     strict=False)
                                    if b - a >= 2])
            keep[owner[worst]] = False
            segs = [x[a:b][keep[a:b]] for a, b in zip(edges, edges[1:], strict=False)]
            segs = [s for s in segs if s.size >= 2]
            dev = np.concatenate([s - s.mean() for s in segs])
            df = dev.size - len(segs)
    if df < 1:
        return math.nan, 0, int(dev.size)
    return math.sqrt(float(np.sum(dev * dev)) / df), df, int(dev.size)


def _dispersion(x: np.ndarray) -> float | None:
    """Within-run dispersion: the MAD of the (log) samples as an sd; None if < 3."""
    if x.size < 3:
        return None
    return _mad_sd(x)


def _dispersion_test(cur: np.ndarray, runs: list[np.ndarray], fs: FigureSettings
                     ) -> tuple[float, float, float, float] | None:
    """(current, baseline typical, ratio, one-sided p of growth) or None."""
    dc = _dispersion(cur)
    base = [d for d in (_dispersion(r) for r in runs) if d is not None]
    if dc is None or len(base) < 3:
        return None
    # a dispersion below the practical threshold counts as the threshold: samples
    # scattered by less than what matters are not unstable, however much less they
    # scattered before (the lab's clean bw_4MiB: 0.13-11 % in 20 runs)
    floor = max(fs.min_spread, fs.threshold, 1e-12)
    logs = np.log(np.maximum(base, floor))
    typical = float(np.exp(np.median(logs)))
    ratio = max(dc, floor) / max(typical, floor)
    sd = max(float(np.std(logs, ddof=1)), math.sqrt(LOG_MAD_VAR / cur.size))
    t = (math.log(max(dc, floor)) - float(np.mean(logs))) / (sd * math.sqrt(1 + 1 / len(logs)))
    p = float(_stats().t.sf(t, len(logs) - 1))
    return dc, typical, ratio, p


def _assess(data: FigureData, fs: FigureSettings, name: str) -> _Assessment | None:
    better = data.better
    if better not in BETTER:
        raise InputError(f"{name}: better: '{better}' must be 'higher' or 'lower'")
    cur = _check_values(data.current, f"{name}: current run")
    starts = list(data.level_starts)
    runs = []
    for i, r in enumerate(data.baseline_runs):
        if len(r) > 0:
            runs.append(_check_values(r, f"{name}: baseline run {i}"))
        else:  # an empty run is no run: later level starts move back by one
            starts = [s - 1 if s > len(runs) else s for s in starts]
    window = max(fs.spread_runs, fs.k)
    cut = max(len(runs) - window, 0)
    runs = runs[cut:]
    starts = [s - cut for s in starts if s - cut > 0]
    if len(runs) < fs.k:
        return None
    level_runs = runs[-fs.k:]
    positive = bool(np.all(cur > 0) and all(np.all(r > 0) for r in runs))
    scale = "log" if positive else "linear"
    tr = np.log if positive else (lambda a: a)
    medians = np.array([float(np.median(tr(r))) for r in runs])
    level_medians = medians[-fs.k:]
    base = float(np.mean(level_medians))
    spread, df, used = pooled_spread(medians, starts)
    if math.isnan(spread):  # every level has one run: fall back to the last k runs
        spread, df, used = float(np.std(level_medians, ddof=1)), fs.k - 1, fs.k
    spread2 = spread * spread
    if not positive:  # the floor is relative: on a linear scale relative to the level
        floor = (fs.min_spread * abs(base)) ** 2
    else:
        floor = fs.min_spread ** 2
    within = [_median_var(tr(r)) for r in runs]
    within = [v for v in within if not math.isnan(v)]
    v_bar = float(np.mean(within)) if within else 0.0
    # The current run's within-run variance can widen the interval, never narrow it:
    # from 5 samples it is too rough to trust a small value (lab: bw_256KiB).
    v_cur = _median_var(tr(cur))
    v_cur = v_bar if math.isnan(v_cur) else max(v_cur, v_bar)
    spread2 = max(spread2, floor, v_bar)
    between = max(spread2 - v_bar, 0.0)
    k = len(level_runs)
    var_pred = between + v_cur + spread2 / k
    se = math.sqrt(var_pred)
    cur_level = float(np.median(tr(cur)))
    diff = cur_level - base
    df = max(int(df), 1)
    tstat = diff / se
    # worse: smaller for higher-better figures, larger for lower-better
    p_lower = float(_stats().t.cdf(tstat, df))
    p_higher = float(_stats().t.sf(tstat, df))
    p_worse, p_better = (p_lower, p_higher) if better == "higher" else (p_higher, p_lower)
    inv = np.exp if positive else (lambda a: a)
    disp = None
    if fs.unstable > 0:
        rel = (lambda a: np.log(a)) if positive else (lambda a: a / abs(base) if base else a)
        disp = _dispersion_test(rel(cur), [rel(r) for r in runs], fs)
    return _Assessment(
        better=better, settings=fs, scale=scale, base_level=base, cur_level=cur_level,
        diff=diff, se=se, df=df, p_worse=p_worse, p_better=p_better, between_var=between,
        within_var_current=v_cur, baseline_runs=k, samples=int(cur.size),
        baseline_median=float(inv(base)), current_median=float(np.median(cur)),
        spread=math.sqrt(spread2) if positive else math.sqrt(spread2) / (abs(base) or 1.0),
        spread_runs=used, medians=tuple(float(m) for m in medians), dispersion=disp,
    )


def _relative(a: _Assessment, diff: float) -> float:
    if a.scale == "log":
        return math.expm1(min(diff, 700.0))
    return diff / abs(a.base_level) if a.base_level != 0 else math.inf


def _threshold_on_scale(a: _Assessment, thr: float | None = None) -> float:
    """The practical threshold as a (positive) difference on the judged scale, in
    the worse direction: -5 % for a higher-better figure is log(0.95)."""
    thr = a.settings.threshold if thr is None else thr
    if a.scale == "log":
        return -math.log1p(-min(thr, 0.999999)) if a.better == "higher" else math.log1p(thr)
    return thr * abs(a.base_level)


def _threshold_better(a: _Assessment) -> float:
    """The threshold in the better direction on the judged scale."""
    thr = a.settings.threshold
    if a.scale == "log":
        return math.log1p(thr) if a.better == "higher" else -math.log1p(-min(thr, 0.999999))
    return thr * abs(a.base_level)


@functools.lru_cache(maxsize=1024)
def _t_quantile(q: float, df: int) -> float:
    return float(_stats().t.ppf(q, df))


@functools.lru_cache(maxsize=64)
def _runs_table(alpha: float, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = np.arange(1, 201)
    kk = np.maximum(k, m)
    return m, kk, _stats().t.ppf(1 - alpha, kk - 1)


@functools.lru_cache(maxsize=64)
def _baseline_table(alpha: float, df: int) -> tuple[np.ndarray, np.ndarray]:
    kb = np.arange(2, 1001)
    return kb, np.full(kb.shape, _stats().t.ppf(1 - alpha, df))


def _needed(a: _Assessment) -> Needed:
    thr = _threshold_on_scale(a)
    alpha = a.settings.alpha
    k = a.baseline_runs
    run_var = a.between_var + a.within_var_current  # variance of one run's median
    t_k = _t_quantile(1 - alpha, a.df)
    resolvable = t_k * math.sqrt(run_var * (1 + 1 / k))
    smallest = (-math.expm1(-resolvable) if a.better == "higher" else math.expm1(resolvable)) \
        if a.scale == "log" else resolvable / (abs(a.base_level) or 1.0)
    if thr <= 0:
        return Needed(None, None, None, smallest)
    # m new runs against a baseline of at least as many (the sustained-change rule)
    m, kk, t_m = _runs_table(alpha, k)
    ok = t_m * np.sqrt(run_var * (1 / m + 1 / kk)) <= thr
    runs = int(m[ok][0]) if ok.any() else None
    # one run against a longer level (the spread's degrees of freedom kept)
    kb, t_b = _baseline_table(alpha, a.df)
    ok = t_b * np.sqrt(run_var * (1 + 1 / kb)) <= thr
    baseline = int(kb[ok][0]) if ok.any() else None
    if baseline is not None:
        baseline = max(baseline, k)
    samples = None
    n = max(a.samples, 1)
    budget = (thr / t_k) ** 2 / (1 + 1 / k) - a.between_var
    if budget > 0:
        per_sample = a.within_var_current * n  # variance of the median times n
        samples = max(int(math.ceil(per_sample / budget)), 1) if per_sample > 0 else 1
    return Needed(runs, baseline, samples, smallest)


def _pct(thr: float) -> str:
    return f"{thr:.0%}" if thr * 100 == round(thr * 100) else f"{thr:.1%}"


@dataclass
class _Family:
    name: str
    keys: list[str]
    p_worse: float = 1.0
    p_better: float = 1.0
    adj_worse: float = 1.0
    adj_better: float = 1.0
    #: the Holm step level the family was compared at, per side
    level_worse: float = 0.05
    level_better: float = 0.05
    alpha: float = 0.05
    extra: dict[str, Any] = field(default_factory=dict)


def _decide(a: _Assessment, fam: _Family, unstable_p: float | None) -> FigureVerdict:
    fs = a.settings
    change = _relative(a, a.diff)
    worse_by = -change if a.better == "higher" else change
    size = len(fam.keys)
    rej_worse = fam.adj_worse < fam.alpha
    rej_better = fam.adj_better < fam.alpha
    # the level of this figure's decision: the family's Holm level when the family
    # moved; when it did not, the level at which this figure alone would have moved
    # it (its Bonferroni share of the family's rest): an interval at that level
    # wholly beyond the threshold would have rejected the family
    # A family that moved names its figures by Holm within it, at the family's level.
    alone = 1 if size == 1 else size / (1 - MEAN_SHARE)
    key = fam.extra.get("key", {}).get(id(a), "")
    a_worse = (fam.level_worse * fam.extra.get("worse", {}).get(key, 1.0) if rej_worse
               else fam.level_worse / alone)
    a_better = (fam.level_better * fam.extra.get("better", {}).get(key, 1.0) if rej_better
                else fam.level_better / alone)
    level = a_worse if worse_by > 0 else a_better
    tq = _t_quantile(1 - level, a.df)
    lo, hi = a.diff - tq * a.se, a.diff + tq * a.se
    ci_low, ci_high = sorted((_relative(a, lo), _relative(a, hi)))
    sign = 1.0 if a.better == "lower" else -1.0  # worse = sign * diff > 0
    near_worse = min(sign * lo, sign * hi)  # the interval's end nearest to no change
    beyond = near_worse >= _threshold_on_scale(a) if worse_by > 0 else False
    near_better = min(-sign * lo, -sign * hi)
    beyond_better = near_better >= _threshold_better(a) if worse_by < 0 else False
    sig_worse = (rej_worse and a.p_worse < a_worse) or beyond
    sig_better = (rej_better and a.p_better < a_better) or beyond_better
    pct = _pct(fs.threshold)
    # the figure's adjusted p: the smallest alpha at which it would be named (its
    # family's adjusted p, and its own p scaled by its step in the family)
    if worse_by > 0:
        p = a.p_worse
        p_adj = max(fam.adj_worse, min(1.0, p * fam.alpha / a_worse))
    else:
        p = a.p_better
        p_adj = max(fam.adj_better, min(1.0, p * fam.alpha / a_better))
    needed = _needed(a)
    disp = None
    unstable = False
    if a.dispersion is not None:
        dc, db, ratio, _ = a.dispersion
        disp = {"current": dc, "baseline": db, "ratio": ratio}
        if unstable_p is not None:  # the stability test's p, after Holm across figures
            disp["p"] = unstable_p
        unstable = (unstable_p is not None and unstable_p < fs.alpha
                    and ratio >= fs.unstable > 0)
    if sig_worse and worse_by >= fs.threshold:
        outcome, note = "regressed", f"worse by {worse_by:.1%}, beyond the {pct} threshold"
        if not rej_worse:
            note += " (its interval lies wholly beyond it)"
    elif unstable:
        outcome = "unstable"
        note = (f"within-run spread {disp['current']:.1%} vs {disp['baseline']:.1%} "
                f"({disp['ratio']:.1f}x, p={unstable_p:.2g})")
    elif sig_worse:
        outcome, note = "warn", f"worse by {worse_by:.1%}: significant, within the {pct} threshold"
    elif sig_better and -worse_by >= fs.threshold:
        outcome, note = "improved", f"better by {-worse_by:.1%}, beyond the {pct} threshold"
    elif worse_by >= fs.threshold:
        outcome = "inconclusive"
        note = (f"worse by {worse_by:.1%} but within the noise (p={p_adj:.2g}); "
                + _needed_text(needed))
    else:
        outcome, note = "pass", "within the noise and the threshold"
    return FigureVerdict(
        outcome=outcome, better=a.better, baseline_median=a.baseline_median,
        current_median=a.current_median, change=change, ci_low=ci_low, ci_high=ci_high,
        p_value=p, p_adjusted=p_adj, needed=needed, note=note,
        threshold=fs.threshold, baseline_runs=a.baseline_runs, samples=a.samples,
        family=fam.name if size > 1 else "", spread=a.spread, spread_runs=a.spread_runs,
        level_runs=a.baseline_runs, dispersion=disp, ci_level=1 - 2 * level,
    )


def _needed_text(n: Needed) -> str:
    parts = []
    if n.runs is not None:
        parts.append(f"{n.runs} consecutive runs at this level (and as many in the baseline)")
    if n.baseline_runs is not None:
        parts.append(f"a baseline of {n.baseline_runs} runs")
    if n.samples is not None:
        parts.append(f"{n.samples} samples per run")
    if not parts:
        return "the run-to-run spread is wider than the threshold: raise the threshold"
    return "would resolve the threshold: " + " or ".join(parts)


def _no_baseline(current: Sequence[float], better: str, fs: FigureSettings,
                 have: int) -> FigureVerdict:
    cur = np.asarray(list(current), dtype=float)
    return FigureVerdict(
        outcome="no-baseline", better=better, baseline_median=None,
        current_median=float(np.median(cur)) if cur.size else None, change=None, ci_low=None,
        ci_high=None, p_value=None, p_adjusted=None, needed=None,
        note=f"{have} accepted run(s) in the baseline, {fs.k} needed",
        threshold=fs.threshold, baseline_runs=have, samples=int(cur.size),
    )


def judge_figure(baseline_runs: Sequence[Sequence[float]], current: Sequence[float],
                 better: str, settings: JudgingSettings | FigureSettings | None = None,
                 *, name: str = "figure") -> FigureVerdict:
    """Judge one figure alone (a family of one, no correction: use ``judge_run``
    for a run's figures).

    ``baseline_runs``: the samples of each accepted run, oldest first; the last
    ``spread_runs`` give the spread, the last ``k`` the level. ``current``: this
    run's samples. ``better``: 'higher' or 'lower'. ``name`` is
    ``"<check>/<variable>"`` (per-figure settings, messages).
    """
    fs = _figure_settings(settings, name)
    data = FigureData(baseline_runs, current, better)
    a = _assess(data, fs, name)
    if a is None:
        have = sum(1 for r in baseline_runs if len(r) > 0)
        return _no_baseline(current, better, fs, have)
    fam = _Family("", [name], a.p_worse, a.p_better, a.p_worse, a.p_better, fs.alpha,
                  fs.alpha, fs.alpha)
    up = a.dispersion[3] if a.dispersion is not None else None
    return _decide(a, fam, up)


def _figure_settings(settings: JudgingSettings | FigureSettings | None,
                     name: str) -> FigureSettings:
    if settings is None:
        return JudgingSettings().for_figure(name)
    if isinstance(settings, FigureSettings):
        return settings
    return settings.for_figure(name)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def holm_levels(p_values: Sequence[float], alpha: float,
                tests: float | None = None) -> list[float]:
    """The level Holm compares each p-value with: ``alpha / (m - rank)``; with
    ``tests``, ``m`` is that effective number of tests (at least 1 per step)."""
    m = len(p_values)
    eff = float(m) if tests is None else tests
    order = sorted(range(m), key=lambda i: p_values[i])
    levels = [0.0] * m
    for rank, i in enumerate(order):
        levels[i] = alpha / max(eff - rank, 1.0)
    return levels


def effective_figures(n: int, corr: np.ndarray | None) -> float:
    """Effective number of independent figures of a family: ``n^2 / sum(R)``
    (1 when the figures move as one, ``n`` when independent; ``n`` when the
    correlation is not known, the safe side for naming figures)."""
    if n == 1:
        return 1.0
    if corr is None:
        return float(n)
    return float(min(max(n * n / max(float(np.sum(corr)), n), 1.0), n))


def adjust(p_values: Sequence[float], correction: str) -> list[float]:
    """Adjusted p-values across a run's figures: 'holm' or 'bh' (Benjamini-Hochberg)."""
    if not p_values:
        return []
    if correction == "holm":
        return holm(p_values)
    if correction == "bh":
        return [float(p) for p in _stats().false_discovery_control(np.asarray(p_values),
                                                                method="bh")]
    raise InputError(f"correction: '{correction}' is not known; use holm or bh")


def _levels(p_values: Sequence[float], adjusted: Sequence[float], alpha: float,
            correction: str) -> list[float]:
    if correction == "holm":
        return holm_levels(p_values, alpha)
    # BH: the figure's level is alpha * p / p_adjusted (rank / m of it)
    return [alpha * p / pa if pa > 0 else alpha for p, pa in zip(p_values, adjusted,
                                                                  strict=True)]


def family_name(unit: str, better: str) -> str:
    """The default family name of a figure with this unit and direction."""
    if better == "higher" and unit.endswith("/s"):
        return "bandwidth"
    if better == "lower" and unit in TIME_UNITS:
        return "latency"
    return f"{better} {unit}".strip()


def _case_of(key: str) -> str:
    return key.rsplit("/", 1)[0] if "/" in key else ""


def families(figures: Mapping[str, FigureData], settings: JudgingSettings
             ) -> dict[tuple[str, str], list[str]]:
    """``(case, family name) -> figure keys``: the site's ``families:`` globs first,
    else the figures of one test case with the same unit and direction."""
    out: dict[tuple[str, str], list[str]] = {}
    for key, data in figures.items():
        named = settings.family_of(key)
        group = (("", named) if named is not None
                 else (_case_of(key), family_name(data.unit, data.better)))
        out.setdefault(group, []).append(key)
    return out


def stouffer(z: Sequence[float], corr: np.ndarray | None) -> float:
    """Mean of normal scores ``z`` divided by its sd under their correlation
    ``corr`` (None: perfectly correlated); the variance is floored at the
    independent case's (a negative correlation estimated from few runs must not
    make the test bolder)."""
    n = len(z)
    if n == 1:
        return float(z[0])
    if corr is None:
        var = 1.0
    else:
        var = min(max(float(np.sum(corr)) / (n * n), 1.0 / n), 1.0)
    return float(np.mean(z)) / math.sqrt(var)


def _correlation(members: list[_Assessment]) -> np.ndarray | None:
    """Correlation of the members' log run medians over the runs they share (the
    last ones: figures of one case come from the same runs); None below 4 runs."""
    n = min(len(m.medians) for m in members)
    if n < 4:
        return None
    x = np.array([m.medians[-n:] for m in members])
    sd = x.std(axis=1)
    if np.any(sd == 0):
        return None
    corr = np.corrcoef(x)
    # orient so that positive means "both worse"
    sign = np.array([1.0 if m.better == "lower" else -1.0 for m in members])
    return corr * np.outer(sign, sign)


def _family_p(p_mean: float, p_figures: Sequence[float]) -> float:
    """A family's p: the smaller of the averaged test (a cause that moves all its
    figures: ``MEAN_SHARE`` of the level) and the smallest figure's (a cause that
    moves one: the rest of the level, Bonferroni over the figures); a family of
    one is its figure."""
    n = len(p_figures)
    if n == 1:
        return float(p_figures[0])
    return min(1.0, p_mean / MEAN_SHARE, n * min(p_figures) / (1 - MEAN_SHARE))


def _normal_score(p: float) -> float:
    return float(_stats().norm.isf(min(max(p, 1e-300), 1 - 1e-16)))


def judge_run(figures: Mapping[str, FigureData | tuple], settings: JudgingSettings | None = None,
              ) -> dict[str, FigureVerdict]:
    """Judge all figures of one run: one test per family, corrected across the
    run's families (``settings.correction``), then a verdict per figure.

    ``figures`` maps ``"<check>/<variable>"`` (with parameters if the check has
    any, e.g. ``"imb_pingpong_internode_check %cache=warm/bw_1MiB"``) to
    ``FigureData(baseline_runs, current, better, unit)``. Regressions and
    improvements are corrected separately; ``no-baseline`` figures take no
    part. Within-run dispersions are tested per figure, Holm across figures.
    Returns the verdicts in the same order.
    """
    settings = settings or JudgingSettings()
    assessed: dict[str, _Assessment] = {}
    verdicts: dict[str, FigureVerdict | None] = {}
    datas: dict[str, FigureData] = {}
    for key, raw in figures.items():
        data = FigureData(*raw)
        fs = settings.for_figure(key)
        a = _assess(data, fs, key)
        if a is None:
            have = sum(1 for r in data.baseline_runs if len(r) > 0)
            verdicts[key] = _no_baseline(data.current, data.better, fs, have)
        else:
            assessed[key] = a
            datas[key] = data
            verdicts[key] = None
    fams: list[_Family] = []
    for (_, name), keys in families(datas, settings).items():
        members = [assessed[k] for k in keys]
        corr = _correlation(members) if len(members) > 1 else None
        zw = [_normal_score(m.p_worse) for m in members]
        zb = [_normal_score(m.p_better) for m in members]
        stats = _stats()
        fam = _Family(name, keys, alpha=min(m.settings.alpha for m in members))
        fam.p_worse = _family_p(float(stats.norm.sf(stouffer(zw, corr))),
                                [m.p_worse for m in members])
        fam.p_better = _family_p(float(stats.norm.sf(stouffer(zb, corr))),
                                 [m.p_better for m in members])
        # within the family: Holm's step levels as fractions of the family's level,
        # over the family's effective number of independent figures (1 when they
        # move as one, n when independent)
        fam.extra["key"] = {id(m): k for m, k in zip(members, keys, strict=True)}
        n_eff = effective_figures(len(members), corr)
        for side in ("worse", "better"):
            ps = [getattr(m, f"p_{side}") for m in members]
            fam.extra[side] = dict(zip(keys, holm_levels(ps, 1.0, n_eff), strict=True))
        fams.append(fam)
    for side in ("worse", "better"):
        ps = [getattr(f, f"p_{side}") for f in fams]
        adj = adjust(ps, settings.correction)
        levels = _levels(ps, adj, settings.alpha, settings.correction)
        for f, pa, lv in zip(fams, adj, levels, strict=True):
            setattr(f, f"adj_{side}", pa)
            # a family's own alpha (per-figure settings) scales its level
            setattr(f, f"level_{side}", lv * f.alpha / settings.alpha)
    # stability: one test per figure, Holm across the figures that have one
    disp_keys = [k for k, a in assessed.items() if a.dispersion is not None]
    disp_adj = dict(zip(disp_keys, holm([assessed[k].dispersion[3] for k in disp_keys]),
                        strict=True))
    for fam in fams:
        for key in fam.keys:
            verdicts[key] = _decide(assessed[key], fam, disp_adj.get(key))
    return {k: v for k, v in verdicts.items() if v is not None}


def summarize(verdicts: Mapping[str, FigureVerdict]) -> dict[str, int]:
    """Count of verdicts per outcome (every outcome present, possibly 0)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for v in verdicts.values():
        counts[v.outcome] += 1
    return counts
