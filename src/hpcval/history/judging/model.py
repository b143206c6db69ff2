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

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from hpcval.core.errors import InputError
from hpcval.history.judging import modes
from hpcval.history.judging.settings import FigureSettings


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
    #: the run statistic judged: "median", or "fast" (the fast mode of a
    #: two-moded figure: :mod:`hpcval.history.judging.modes`)
    statistic: str = "median"
    #: the slow-mode share test of a two-moded figure (ShareTest.as_dict)
    slow_share: dict[str, float] | None = None

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
    #: runs measured between the newest baseline run and this one (called, held:
    #: not accepted); 0: right behind it; None: unknown. Where runs depend on
    #: each other, a run behind called runs (or unknown) is taken as unrelated to
    #: the level's runs
    gap: int | None = None


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
    statistic: str = "median"
    share: Any = None  # modes.ShareTest of a two-moded figure
    #: the current run of a two-moded figure has no sample in the fast mode
    fast_absent: bool = False
    #: run values two-moded between runs: (modes.rank_p of the current run among
    #: the accepted runs of its level, how many runs), else None
    rank: tuple[float, int] | None = None


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


#: Runs from which the tails of the run-to-run noise are read (fewer: normal).
TAIL_RUNS = 15


#: Largest lag-1 correlation between runs the verdicts allow for: beyond it the
#: runs hardly tell anything apart from a level that moves by itself.
RHO_MAX = 0.9
#: Fewest accepted runs a lag-1 correlation is estimated from (fewer: runs are
#: taken as independent).
RHO_RUNS = 10


def lag1(values: Sequence[float], starts: Sequence[int] = ()) -> float:
    """Lag-1 correlation between consecutive runs of ``values`` (log run values,
    oldest first), deviations taken from the mean of each level (``starts``:
    indexes where a new level begins; pairs across a start are not counted),
    corrected for its small-sample bias (``+ (1 + 3 r) / n``, Marriott and
    Pope's approximation for an AR(1)) and kept within ``[0, RHO_MAX]``: a
    negative estimate makes the rule no bolder. 0 with fewer than
    :data:`RHO_RUNS` values."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n < RHO_RUNS:
        return 0.0
    edges = [0, *[s for s in sorted(set(starts)) if 0 < s < n], n]
    dev = np.empty(n)
    num = 0.0
    for a, b in zip(edges, edges[1:], strict=False):
        dev[a:b] = x[a:b] - x[a:b].mean()
        num += float(np.sum(dev[a + 1:b] * dev[a:b - 1]))
    den = float(np.sum(dev * dev))
    if den <= 0:
        return 0.0
    r = num / den
    r += (1 + 3 * r) / n
    return float(min(max(r, 0.0), RHO_MAX))


def level_factor(rho: float, k: int) -> float:
    """Variance of the mean of ``k`` consecutive AR(1) runs of lag-1 correlation
    ``rho``, in units of one run's variance: ``sum_ij rho^|i-j| / k^2`` (``1 / k``
    for independent runs)."""
    if k < 1:
        return 1.0
    idx = np.arange(k)
    return float(np.sum(rho ** np.abs(idx[:, None] - idx[None, :]))) / (k * k)


def _tail_df(medians: np.ndarray, level_starts: Sequence[int]) -> int:
    """Degrees of freedom of a t distribution with the excess kurtosis of the
    run medians' deviations from their levels (moment matching: nu = 4 + 6 /
    kurtosis, at least 4); a large number when there are fewer than
    :data:`TAIL_RUNS` runs or no excess kurtosis."""
    x = np.asarray(medians, dtype=float)
    if x.size < TAIL_RUNS:
        return 10**6
    edges = sorted({0, *[i for i in level_starts if 0 < i < x.size], x.size})
    dev = np.concatenate([x[a:b] - x[a:b].mean() for a, b in zip(edges, edges[1:],
                                                                   strict=False) if b - a >= 2])
    sd2 = float(np.mean(dev * dev))
    if dev.size < TAIL_RUNS or sd2 <= 0:
        return 10**6
    kurt = float(np.mean(dev ** 4)) / (sd2 * sd2) - 3.0
    if kurt <= 0:
        return 10**6
    return max(4, int(4 + 6 / kurt))


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
    # the level: the last k runs, from the newest level a person accepted on
    # (a held or regressed run accepted as the new level is not averaged with
    # the old level's runs; its interval is wider while it has fewer than k)
    first = max([len(runs) - fs.k, *starts])
    level_runs = runs[first:]
    positive = bool(np.all(cur > 0) and all(np.all(r > 0) for r in runs))
    scale = "log" if positive else "linear"
    tr = np.log if positive else (lambda a: a)
    # the run statistic: the median, or for a two-moded figure its fast mode
    # (docs/judging.md, "Which statistic")
    statistic, cut = "median", None
    all_runs = runs
    if positive and fs.statistic in ("fast", "auto"):
        cut = modes.split([np.log(r) for r in runs])
        if fs.statistic == "fast" or cut is not None:
            statistic = "fast"
            # the fast mode's level comes from the runs that have fast samples (a
            # run wholly in the slow mode counts in the slow-mode share only)
            keep = [i for i, r in enumerate(runs)
                    if modes.fast_side(np.log(r), cut, better).size >= modes.MIN_FAST]
            # from as few as two such runs (a wider interval): the fast ends of runs
            # wholly in the slow mode are no level of the fast mode (on the loaded lab,
            # 3 of 5 baseline runs of lat_0B had none; mixed in, the "fast level"
            # jumped by 150 % from run to run and every clean run was held)
            if len(keep) >= 2:
                starts = sorted({sum(1 for i in keep if i < s0) for s0 in starts} - {0})
                runs = [runs[i] for i in keep]
                first = max([len(runs) - fs.k, *starts])
                level_runs = runs[first:]

    def level_of(x: np.ndarray) -> float:
        # the fast mode's own centre; a run without one: its fast end
        return modes.run_level(tr(x), better, statistic, cut)

    def level_var(x: np.ndarray) -> float:
        if statistic == "median":
            return _median_var(tr(x))
        if cut is not None:
            side = modes.fast_side(tr(x), cut, better)
            if side.size >= modes.MIN_FAST:
                return _median_var(side)
        return modes.fast_var(tr(x), better)

    medians = np.array([level_of(r) for r in runs])
    level_medians = medians[first:]
    base = float(np.mean(level_medians))
    spread, df, used = pooled_spread(medians, starts)
    if math.isnan(spread):  # every level has one run: fall back to the last k runs
        spread, df, used = float(np.std(medians[-fs.k:], ddof=1)), fs.k - 1, fs.k
    spread2 = spread * spread
    if not positive:  # the floor is relative: on a linear scale relative to the level
        floor = (fs.min_spread * abs(base)) ** 2
    else:
        floor = fs.min_spread ** 2
    within = [level_var(r) for r in runs]
    within = [v for v in within if not math.isnan(v)]
    v_bar = float(np.mean(within)) if within else 0.0
    # The current run's within-run variance can widen the interval, never narrow it:
    # from 5 samples it is too rough to trust a small value (lab: bw_256KiB).
    v_cur = level_var(cur)
    v_cur = v_bar if math.isnan(v_cur) else max(v_cur, v_bar)
    spread2 = max(spread2, floor, v_bar)
    between = max(spread2 - v_bar, 0.0)
    k = len(level_runs)
    var_pred = between + v_cur + spread2 / k
    # runs that depend on each other (a level that wanders and comes back): the
    # window's variance underestimates the between-run variance by about
    # (1 + rho) / (n (1 - rho)). A run right behind the level's runs (``gap`` 0)
    # is judged against the AR(1) forecast from the newest of them; one behind
    # called runs (a level that wandered off, gap >= 1) or of unknown place is
    # taken as unrelated to them, against the level's K runs, which average out
    # less of the wander, and never bolder than for independent runs
    # (docs/judging.md, "Runs that depend on each other")
    rho = lag1(medians[:-5] if medians.size >= RHO_RUNS + 5 else medians,
               starts if medians.size < RHO_RUNS + 5 else [s0 for s0 in starts
                                                           if s0 < medians.size - 5])
    if rho > 0 and between > 0:
        rho_b = min(rho * spread2 / between, RHO_MAX)
        bias = 1.0 - (1 + rho_b) / (max(used, 2) * (1 - rho_b))
        b_marg = between / max(bias, 1 / 3)
        if data.gap == 0:
            # the best linear prediction of an AR(1) one run on: mu + rho (y_prev
            # - mu) (mu: the mean of the level's runs in the window, rho the run
            # values' own lag-1 correlation), its variance the innovation's,
            # var_y (1 - rho^2), the run's within-run excess, mu's error times
            # (1 - rho)^2, and rho's own (var(rho) ~ (1 - rho^2) / n) times
            # (y_prev - mu)^2
            own_m = medians[max([0, *starts]):]
            mu = float(np.mean(own_m))
            prev = float(medians[-1]) - mu
            var_y = b_marg + v_bar
            var_pred = (var_y * (1 - rho * rho) + (v_cur - v_bar)
                        + var_y * level_factor(rho, own_m.size) * (1 - rho) ** 2
                        + prev * prev * (1 - rho * rho) / max(used, 2))
            base = mu + rho * prev
        else:
            var_ar = b_marg + v_cur + b_marg * level_factor(rho_b, k) + v_bar / k
            # at least the independent runs' prediction with the corrected variance
            var_pred = max(b_marg + v_cur + (b_marg + v_bar) / k, var_ar)
    se = math.sqrt(var_pred)
    cur_level = level_of(cur)
    diff = cur_level - base
    df = max(int(df), 1)
    # heavy tails between runs: the t reference's degrees of freedom from the
    # run medians' excess kurtosis (a t(nu) has 6 / (nu - 4)), never more than
    # the spread's own (docs/judging.md, "Which statistic")
    df = min(df, _tail_df(medians, starts))
    tstat = diff / se
    # whole runs in two modes (a slow node in the pool): the t reference reads a
    # two-point mixture as normal and calls a run in the slow mode; the run is
    # also ranked among the accepted runs of its level (modes.rank_p, decided in
    # verdict._decide; docs/judging.md, "Which statistic")
    own = medians[max([0, *starts]):]
    rank = ((modes.rank_p(own, cur_level, better), int(own.size))
            if modes.between_runs(own) else None)
    # worse: smaller for higher-better figures, larger for lower-better
    p_lower = float(_stats().t.cdf(tstat, df))
    p_higher = float(_stats().t.sf(tstat, df))
    p_worse, p_better = (p_lower, p_higher) if better == "higher" else (p_higher, p_lower)
    fast_absent = (cut is not None
                   and modes.fast_side(np.log(cur), cut, better).size < modes.MIN_FAST)
    if fast_absent:  # no fast level in this run: no evidence either way for its family
        p_worse = p_better = 0.5
    inv = np.exp if positive else (lambda a: a)
    disp = None
    # a two-moded figure's MAD measures the share of its slow mode, not its
    # scatter: its stability is the slow-mode share test (modes.share_test)
    if fs.unstable > 0 and cut is None:
        rel = (lambda a: np.log(a)) if positive else (lambda a: a / abs(base) if base else a)
        disp = _dispersion_test(rel(cur), [rel(r) for r in runs], fs)
    return _Assessment(
        better=better, settings=fs, scale=scale, base_level=base, cur_level=cur_level,
        diff=diff, se=se, df=df, p_worse=p_worse, p_better=p_better, between_var=between,
        within_var_current=v_cur, baseline_runs=k, samples=int(cur.size),
        baseline_median=float(inv(base)),
        current_median=float(inv(cur_level)) if statistic == "fast" else float(np.median(cur)),
        spread=math.sqrt(spread2) if positive else math.sqrt(spread2) / (abs(base) or 1.0),
        spread_runs=used, medians=tuple(float(m) for m in medians), dispersion=disp,
        statistic=statistic,
        share=(modes.share_test([np.log(r) for r in all_runs], np.log(cur), cut, better)
               if cut is not None else None),
        fast_absent=fast_absent,
        rank=rank,
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
