"""Judging one run's figures against the last K accepted runs.

The model (docs/judging.md). A figure's value in run ``i`` is the median of its
samples; on the log scale

    m_i = mu + b_i + w_i,   b_i ~ N(0, sigma_b^2)  (between runs: load, placement, cache)
                            w_i ~ N(0, v_i)        (the median's within-run noise)

Samples inside one run share ``b_i``, so pooling them as if independent calls
every between-run shift significant. Instead the current run's median is
judged against the spread of the baseline runs' medians: a prediction interval
with ``K-1`` degrees of freedom. The baseline spread ``s^2`` already holds
``sigma_b^2`` plus the baseline runs' typical within-run variance ``v_bar``; the
current run's own within-run variance ``v_c`` (from its samples) replaces
``v_bar`` when it is larger, so one run with unusually scattered samples is
judged with a wider interval and cannot be called on its scatter:

    var_pred = max(s^2 - v_bar, 0) + max(v_c, v_bar) + s^2 / K
    T = (m_c - mean(m)) / sqrt(var_pred)  ~  t(K-1) under "no change"

``regressed`` needs the test (one-sided, adjusted across the run's figures) AND
a change beyond the practical threshold.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from scipy import stats

from hpcval.errors import InputError
from hpcval.judging.settings import FigureSettings, JudgingSettings

OUTCOMES = ("pass", "regressed", "improved", "warn", "inconclusive", "no-baseline")
BETTER = ("higher", "lower")
#: Scale factor from the MAD to the standard deviation of a normal distribution.
MAD_TO_SD = 1.4826
#: Variance of a sample median relative to the mean's, for normal data (pi/2).
MEDIAN_EFFICIENCY = math.pi / 2


class Needed(NamedTuple):
    """What would resolve the threshold at this noise (``None``: no amount would).

    ``runs``: consecutive runs at this level to combine, judged against a
    baseline of at least as many runs (what the sustained-change rule does);
    ``baseline_runs``: K for a single run to resolve it; ``samples``: samples
    per run for a single run (``None`` when the between-run spread alone is too
    wide: more samples cannot help, only more runs)."""

    runs: int | None
    baseline_runs: int | None
    samples: int | None


@dataclass(frozen=True)
class FigureVerdict:
    """The verdict on one figure of one run."""

    outcome: str
    better: str
    baseline_median: float | None
    current_median: float | None
    #: relative change current / baseline - 1 (negative: smaller value)
    change: float | None
    #: (1 - alpha) interval of ``change`` (between- and within-run noise)
    ci_low: float | None
    ci_high: float | None
    #: one-sided p-value in the direction of the change, before / after the
    #: correction across the run's figures
    p_value: float | None
    p_adjusted: float | None
    #: what would resolve the threshold (filled unless no-baseline)
    needed: Needed | None
    note: str
    threshold: float
    baseline_runs: int
    samples: int

    @property
    def worse_by(self) -> float | None:
        """The change in the figure's worse direction (positive: worse)."""
        if self.change is None:
            return None
        return -self.change if self.better == "higher" else self.change


class FigureData(NamedTuple):
    """One figure of a run as ``judge_run`` takes it."""

    baseline_runs: Sequence[Sequence[float]]
    current: Sequence[float]
    better: str


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


def _check_values(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise InputError(f"{what}: no samples; a judged figure needs at least one")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{what}: samples must be finite numbers, got {values!r}")
    return arr


def _median_var(x: np.ndarray) -> float:
    """Variance of the median of ``x`` (robust: from the MAD); nan if < 2 samples."""
    if x.size < 2:
        return math.nan
    sd = MAD_TO_SD * float(np.median(np.abs(x - np.median(x))))
    if sd == 0.0:
        sd = float(np.std(x, ddof=1))
    return MEDIAN_EFFICIENCY * sd * sd / x.size


def _assess(baseline_runs: Sequence[Sequence[float]], current: Sequence[float], better: str,
            fs: FigureSettings, name: str) -> _Assessment | None:
    if better not in BETTER:
        raise InputError(f"{name}: better: '{better}' must be 'higher' or 'lower'")
    cur = _check_values(current, f"{name}: current run")
    runs = [_check_values(r, f"{name}: baseline run {i}") for i, r in enumerate(baseline_runs)
            if len(r) > 0]
    runs = runs[-fs.k:]
    if len(runs) < fs.k:
        return None
    positive = bool(np.all(cur > 0) and all(np.all(r > 0) for r in runs))
    scale = "log" if positive else "linear"
    tr = np.log if positive else (lambda a: a)
    medians = np.array([float(np.median(tr(r))) for r in runs])
    base = float(np.mean(medians))
    spread2 = float(np.var(medians, ddof=1))
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
    k = len(runs)
    var_pred = between + v_cur + spread2 / k
    se = math.sqrt(var_pred)
    cur_level = float(np.median(tr(cur)))
    diff = cur_level - base
    df = k - 1
    tstat = diff / se
    # worse: smaller for higher-better figures, larger for lower-better
    p_lower = float(stats.t.cdf(tstat, df))
    p_higher = float(stats.t.sf(tstat, df))
    p_worse, p_better = (p_lower, p_higher) if better == "higher" else (p_higher, p_lower)
    inv = np.exp if positive else (lambda a: a)
    return _Assessment(
        better=better, settings=fs, scale=scale, base_level=base, cur_level=cur_level,
        diff=diff, se=se, df=df, p_worse=p_worse, p_better=p_better, between_var=between,
        within_var_current=v_cur, baseline_runs=k, samples=int(cur.size),
        baseline_median=float(inv(base)), current_median=float(np.median(cur)),
    )


def _relative(a: _Assessment, diff: float) -> float:
    if a.scale == "log":
        return math.expm1(diff)
    return diff / abs(a.base_level) if a.base_level != 0 else math.inf


def _threshold_on_scale(a: _Assessment) -> float:
    """The practical threshold as a (positive) difference on the judged scale, in
    the worse direction: -5 % for a higher-better figure is log(0.95)."""
    thr = a.settings.threshold
    if a.scale == "log":
        return -math.log1p(-thr) if a.better == "higher" else math.log1p(thr)
    return thr * abs(a.base_level)


@functools.lru_cache(maxsize=256)
def _t_quantile(q: float, df: int) -> float:
    return float(stats.t.ppf(q, df))


@functools.lru_cache(maxsize=64)
def _runs_table(alpha: float, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = np.arange(1, 201)
    kk = np.maximum(k, m)
    return m, kk, stats.t.ppf(1 - alpha, kk - 1)


@functools.lru_cache(maxsize=64)
def _baseline_table(alpha: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    kb = np.arange(max(k, 2), 1001)
    return kb, stats.t.ppf(1 - alpha, kb - 1)


def _needed(a: _Assessment) -> Needed:
    thr = _threshold_on_scale(a)
    alpha = a.settings.alpha
    if thr <= 0:
        return Needed(None, None, None)
    k = a.baseline_runs
    run_var = a.between_var + a.within_var_current  # variance of one run's median
    t_k = _t_quantile(1 - alpha, k - 1)
    # m new runs against a baseline of at least as many (the sustained-change rule)
    m, kk, t_m = _runs_table(alpha, k)
    ok = t_m * np.sqrt(run_var * (1 / m + 1 / kk)) <= thr
    runs = int(m[ok][0]) if ok.any() else None
    # one run against a longer baseline
    kb, t_b = _baseline_table(alpha, k)
    ok = t_b * np.sqrt(run_var * (1 + 1 / kb)) <= thr
    baseline = int(kb[ok][0]) if ok.any() else None
    samples = None
    n = max(a.samples, 1)
    budget = (thr / t_k) ** 2 / (1 + 1 / k) - a.between_var
    if budget > 0:
        per_sample = a.within_var_current * n  # variance of the median times n
        samples = max(int(math.ceil(per_sample / budget)), 1) if per_sample > 0 else 1
    return Needed(runs, baseline, samples)


def _decide(a: _Assessment, p_adj_worse: float, p_adj_better: float) -> FigureVerdict:
    fs = a.settings
    change = _relative(a, a.diff)
    tq = _t_quantile(1 - fs.alpha / 2, a.df)
    ci_low = _relative(a, a.diff - tq * a.se)
    ci_high = _relative(a, a.diff + tq * a.se)
    worse_by = -change if a.better == "higher" else change
    sig_worse = p_adj_worse < fs.alpha
    sig_better = p_adj_better < fs.alpha
    pct = f"{fs.threshold:.0%}" if fs.threshold * 100 == round(fs.threshold * 100) \
        else f"{fs.threshold:.1%}"
    if worse_by > 0:
        p, p_adj = a.p_worse, p_adj_worse
    else:
        p, p_adj = a.p_better, p_adj_better
    needed = _needed(a)
    if sig_worse and worse_by >= fs.threshold:
        outcome, note = "regressed", f"worse by {worse_by:.1%}, beyond the {pct} threshold"
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
        current_median=a.current_median, change=change, ci_low=min(ci_low, ci_high),
        ci_high=max(ci_low, ci_high), p_value=p, p_adjusted=p_adj, needed=needed, note=note,
        threshold=fs.threshold, baseline_runs=a.baseline_runs, samples=a.samples,
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
    """Judge one figure alone (no correction across figures: use ``judge_run`` for
    a run's figures).

    ``baseline_runs``: the samples of each accepted run, oldest first; the last
    ``k`` are used. ``current``: this run's samples. ``better``: 'higher' or
    'lower'. ``name`` is ``"<check>/<variable>"`` (per-figure settings, messages).
    """
    fs = _figure_settings(settings, name)
    a = _assess(baseline_runs, current, better, fs, name)
    if a is None:
        have = sum(1 for r in baseline_runs if len(r) > 0)
        return _no_baseline(current, better, fs, have)
    return _decide(a, a.p_worse, a.p_better)


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


def adjust(p_values: Sequence[float], correction: str) -> list[float]:
    """Adjusted p-values across a run's figures: 'holm' or 'bh' (Benjamini-Hochberg)."""
    if not p_values:
        return []
    if correction == "holm":
        return holm(p_values)
    if correction == "bh":
        return [float(p) for p in stats.false_discovery_control(np.asarray(p_values),
                                                                method="bh")]
    raise InputError(f"correction: '{correction}' is not known; use holm or bh")


def judge_run(figures: Mapping[str, FigureData | tuple], settings: JudgingSettings | None = None,
              ) -> dict[str, FigureVerdict]:
    """Judge all figures of one run, with the run-wide correction of ``settings``.

    ``figures`` maps ``"<check>/<variable>"`` (with parameters if the check has
    any, e.g. ``"imb_pingpong_internode_check %cache=warm/bw_1MiB"``) to
    ``FigureData(baseline_runs, current, better)``. Regressions and improvements
    are corrected as two separate families over the figures that have a baseline;
    ``no-baseline`` figures take no part. Returns the verdicts in the same order.
    """
    settings = settings or JudgingSettings()
    assessed: dict[str, _Assessment] = {}
    verdicts: dict[str, FigureVerdict | None] = {}
    for key, data in figures.items():
        data = FigureData(*data)
        fs = settings.for_figure(key)
        a = _assess(data.baseline_runs, data.current, data.better, fs, key)
        if a is None:
            have = sum(1 for r in data.baseline_runs if len(r) > 0)
            verdicts[key] = _no_baseline(data.current, data.better, fs, have)
        else:
            assessed[key] = a
            verdicts[key] = None
    keys = list(assessed)
    worse = adjust([assessed[k].p_worse for k in keys], settings.correction)
    better = adjust([assessed[k].p_better for k in keys], settings.correction)
    for key, pw, pb in zip(keys, worse, better, strict=True):
        verdicts[key] = _decide(assessed[key], pw, pb)
    return {k: v for k, v in verdicts.items() if v is not None}


def summarize(verdicts: Mapping[str, FigureVerdict]) -> dict[str, int]:
    """Count of verdicts per outcome (every outcome present, possibly 0)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    for v in verdicts.values():
        counts[v.outcome] += 1
    return counts


def with_outcome(verdict: FigureVerdict, outcome: str, note: str) -> FigureVerdict:
    """A copy of ``verdict`` with another outcome (e.g. a sustained change flagged)."""
    if outcome not in OUTCOMES:
        raise ValueError(outcome)
    return replace(verdict, outcome=outcome, note=note)
