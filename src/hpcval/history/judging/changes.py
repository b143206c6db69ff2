"""Change points in a figure's history of run medians, and the sustained-drop rule.

A single run cannot resolve a change smaller than its prediction interval
(about +-18 % at a run-to-run spread of 7.6 % and K = 5); several runs at a new
level can. ``change_points`` segments the series of run medians (log scale)
with PELT from ``ruptures`` (exact optimal segmentation under an L2 cost and a
penalty scaled by the series' own noise), then keeps only the boundaries whose
two adjacent segments differ by a Welch t-test at level ``alpha`` (as Apache
Otava does with its e-divisive candidates), merging and re-testing until every
boundary left is significant. The result depends only on the points, not on
how many calls came before: appending runs adds change points at the end and,
away from the end, leaves earlier ones where they were.

``sustained_change`` is the rule for a regression spread over several runs:
the last change point of the history, if it is in the figure's worse
direction, beyond the practical threshold, significant, and the level after it
still holds at the newest run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hpcval.core.errors import InputError
from hpcval.history.judging.change import Change
from hpcval.history.judging.families import adjust
from hpcval.history.judging.model import MAD_TO_SD, RHO_MAX
from hpcval.history.judging.settings import FigureSettings, JudgingSettings


@dataclass(frozen=True)
class ChangePoint:
    """A change between ``values[index - 1]`` and ``values[index]``."""

    #: index of the first value at the new level
    index: int
    #: levels of the segment before and after, in the figure's unit (on the log
    #: scale the geometric means, so that ``after / before - 1`` is ``change``;
    #: else the medians)
    before: float
    after: float
    #: relative change after / before - 1
    change: float
    #: Welch t-test of the two adjacent segments (two-sided)
    p_value: float
    #: number of values in the segments before and after
    n_before: int
    n_after: int
    #: interval of ``change`` at ``level`` (Welch's, on the log scale); None when a
    #: segment has one value or the values are not all positive
    low: float | None = None
    high: float | None = None
    level: float | None = None

    def as_change(self) -> Change:
        """The step as the one :class:`Change` every surface prints."""
        return Change(self.change, self.low, self.high, self.level)


def _noise_sd(x: np.ndarray) -> float:
    """Robust noise level from successive differences (ignores steps)."""
    if x.size < 3:
        return float(np.std(x, ddof=1)) if x.size > 1 else 0.0
    d = np.diff(x)
    sd = MAD_TO_SD * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)
    if sd == 0.0:
        sd = float(np.std(d, ddof=1)) / math.sqrt(2)
    return sd


def _welch_interval(a: np.ndarray, b: np.ndarray, level: float = 0.95
                    ) -> tuple[float, float] | None:
    """Interval of ``mean(b) - mean(a)`` (Welch-Satterthwaite), or None."""
    if a.size < 2 or b.size < 2:
        return None
    va, vb = float(np.var(a, ddof=1)) / a.size, float(np.var(b, ddof=1)) / b.size
    se2 = va + vb
    d = float(np.mean(b) - np.mean(a))
    if se2 <= 0:
        return d, d
    df = se2 * se2 / (va * va / (a.size - 1) + vb * vb / (b.size - 1))
    from scipy import stats

    t = float(stats.t.ppf(0.5 + level / 2, df))
    return d - t * math.sqrt(se2), d + t * math.sqrt(se2)


def _welch_p(a: np.ndarray, b: np.ndarray) -> float:
    if np.var(a) == 0 and np.var(b) == 0:
        return 0.0 if float(np.mean(a)) != float(np.mean(b)) else 1.0
    from scipy import stats

    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def change_points(values: Sequence[float], *, alpha: float = 0.01, min_size: int = 2,
                  penalty: float = 3.0, log: bool | None = None) -> list[ChangePoint]:
    """Significant change points of ``values`` (oldest first), earliest first.

    ``min_size``: fewest values in a segment (2: one odd run is not a change);
    ``penalty``: PELT penalty per change point in units of noise variance times
    log(n); ``alpha``: level of the Welch test each kept boundary passes;
    ``log``: judge ratios (default when every value is positive).
    """
    x = np.asarray(list(values), dtype=float)
    if not np.all(np.isfinite(x)):
        raise InputError(f"change points: values must be finite numbers, got {list(values)!r}")
    if min_size < 1:
        raise InputError("change points: min_size must be at least 1")
    if log is None:
        log = bool(np.all(x > 0))
    if log and not np.all(x > 0):
        raise InputError("change points: log scale needs positive values")
    y = np.log(x) if log else x
    n = y.size
    if n < 2 * min_size:
        return []
    sd = _noise_sd(y)
    scale = max(sd, 1e-9 * max(1.0, float(np.max(np.abs(y)))))
    import ruptures  # imported when a history is long enough to segment

    algo = ruptures.Pelt(model="l2", min_size=min_size, jump=1).fit(y / scale)
    bounds = [b for b in algo.predict(pen=penalty * math.log(n)) if b < n]
    # keep only significant boundaries: drop the weakest and re-test until all pass
    while bounds:
        edges = [0, *bounds, n]
        ps = [_welch_p(y[edges[i]:edges[i + 1]], y[edges[i + 1]:edges[i + 2]])
              for i in range(len(bounds))]
        worst = int(np.argmax(ps))
        if ps[worst] < alpha:
            break
        del bounds[worst]
    edges = [0, *bounds, n]
    out = []
    for i, b in enumerate(bounds):
        seg_a, seg_b = x[edges[i]:b], x[b:edges[i + 2]]
        ya, yb = y[edges[i]:b], y[b:edges[i + 2]]
        low = high = level = None
        if log:
            before, after = float(np.exp(np.mean(ya))), float(np.exp(np.mean(yb)))
            change = math.expm1(float(np.mean(yb) - np.mean(ya)))
            ci = _welch_interval(ya, yb)
            if ci is not None:
                low, high, level = math.expm1(ci[0]), math.expm1(ci[1]), 0.95
        else:
            before, after = float(np.median(seg_a)), float(np.median(seg_b))
            change = (after - before) / abs(before) if before else math.inf
        out.append(ChangePoint(index=b, before=before, after=after, change=change,
                               p_value=_welch_p(ya, yb), n_before=len(seg_a),
                               n_after=len(seg_b), low=low, high=high, level=level))
    return out


def sustained_change(history: Sequence[float], better: str,
                     settings: JudgingSettings | FigureSettings | None = None, *,
                     name: str = "figure", alpha: float = 0.01,
                     min_size: int = 2) -> ChangePoint | None:
    """The ongoing worse level at the end of ``history`` (run medians, oldest first,
    the newest run last), or ``None``.

    Flags when the last change point of the series is in the worse direction by
    at least the figure's threshold and its Welch test has p < ``alpha``: a drop
    that has held for at least ``min_size`` runs. It needs ``k`` runs before the
    change (the baseline) so that the level before is known.
    """
    if better not in ("higher", "lower"):
        raise InputError(f"{name}: better: '{better}' must be 'higher' or 'lower'")
    if settings is None:
        fs = JudgingSettings().for_figure(name)
    elif isinstance(settings, FigureSettings):
        fs = settings
    else:
        fs = settings.for_figure(name)
    if len(history) < fs.k + min_size:
        return None  # no level before a change can be known yet
    points = change_points(history, alpha=alpha, min_size=min_size)
    if not points:
        return None
    last = points[-1]
    worse_by = -last.change if better == "higher" else last.change
    if worse_by >= fs.threshold and last.n_before >= fs.k:
        return last
    return None


#: Level of the sustained rule. The Welch p of a boundary that PELT chose where the
#: two sides differ most is optimistic (the location was selected), so the rule
#: uses a level 5x stricter than the verdicts' alpha; measured on seeded noise and
#: on the lab's clean runs (docs/judging.md).
SUSTAINED_ALPHA = 0.01


def sustained_run(histories: Mapping[str, tuple[Sequence[float], str]],
                  settings: JudgingSettings | None = None, *, alpha: float = SUSTAINED_ALPHA,
                  min_size: int = 2) -> dict[str, ChangePoint]:
    """The sustained rule over all figures of a run, corrected like the verdicts.

    ``histories`` maps ``"<check>/<variable>"`` to ``(run medians oldest first with
    the current run last, better)``. A figure's candidate is the last change point
    of its history (found at level ``alpha``) that is worse by at least its
    threshold with at least ``k`` runs before it; the candidates' Welch p-values
    are adjusted across all figures (``settings.correction``, figures without a
    candidate count as p = 1), and those still below ``alpha`` are returned.
    """
    settings = settings or JudgingSettings()
    candidates: dict[str, ChangePoint] = {}
    for key, (medians, better) in histories.items():
        fs = settings.for_figure(key)
        found = sustained_change(medians, better, fs, name=key, alpha=alpha,
                                 min_size=min_size)
        if found is not None:
            candidates[key] = found
    keys = list(histories)
    p = [candidates[k].p_value if k in candidates else 1.0 for k in keys]
    adjusted = adjust(p, settings.correction)
    return {k: candidates[k] for k, pa in zip(keys, adjusted, strict=True)
            if k in candidates and pa < alpha}


# --------------------------------------------------------------------------- CUSUM
#: Reference value of the CUSUM in sds of a run median: tuned to a shift of 1 sd.
CUSUM_K = 0.5
#: Decision limit. On self-started scores of seeded clean series (sd 7 %), h = 3
#: ran 142 runs between false flags (h = 4: 378, 5: > 800) and flagged a 10 %
#: drop (1.4 sds) within 5 runs in 67 of 100 (h = 4: 52, 5: 25). On the lab's
#: recorded runs (bench/detection_eval.py, docs/judging.md) the clean runs are
#: not one stationary series (two sessions, a slow drift in bw_256KiB): h = 3.5
#: and 4 flagged 5 per 100 clean runs of the bandwidth family, h = 5 1.2 (0.3 in
#: replays), with 10 % drops still flagged within 5 runs in 7-8 of 10 (the
#: single-run verdicts call most of them). h = 5 keeps the false flags near the
#: target of 1 per 100 runs per family on real data.
CUSUM_H = 5.0
#: Runs before the detector starts (the level and sd need them).
CUSUM_START = 5


def cusum_scores(values: Sequence[float], better: str) -> list[float]:
    """Self-started standardized scores of ``values`` (log run medians, oldest
    first), positive when worse: run t against the mean and sd of the runs before
    it, as a normal score of its t statistic (Hawkins' self-starting CUSUM)."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    sign = 1.0 if better == "lower" else -1.0
    out = []
    for t in range(CUSUM_START, x.size):
        prev = x[:t]
        sd = float(np.std(prev, ddof=1))
        if sd <= 0:
            out.append(0.0)
            continue
        tstat = sign * (x[t] - float(np.mean(prev))) / (sd * math.sqrt(1 + 1 / t))
        out.append(float(stats.norm.isf(stats.t.sf(tstat, t - 1))))
    return out


def cusum(scores: Sequence[float], k: float = CUSUM_K) -> list[float]:
    """Page's one-sided CUSUM ``S_t = max(0, S_{t-1} + z_t - k)``."""
    s, out = 0.0, []
    for z in scores:
        s = max(0.0, s + z - k)
        out.append(s)
    return out


def deflate(rho: float) -> float:
    """Factor on the scores of runs whose lag-1 correlation is ``rho``: the sum of
    ``m`` AR(1) scores has variance about ``m (1 + rho) / (1 - rho)``, so the
    scores times ``sqrt((1 - rho) / (1 + rho))`` add up like independent ones
    (the CUSUM's drift and its run length between false flags are those of
    independent runs)."""
    rho = min(max(rho, 0.0), RHO_MAX)
    return math.sqrt((1 - rho) / (1 + rho))


def cusum_run(families: Mapping[str, Sequence[tuple[Sequence[float], str]]],
              h: float = CUSUM_H, rho: Mapping[str, float] | None = None
              ) -> dict[str, tuple[float, int]]:
    """Families whose CUSUM is beyond ``h`` at the newest run.

    ``families`` maps a family's name to its figures' ``(run medians, oldest first
    with the current run last, better)``; each run's family score is the mean of
    its figures' self-started scores (the figures of one family move together, so
    the mean is about as noisy as one of them: divided by the sd of the mean
    measured on the scores themselves, at least that of independent figures'
    mean), then times :func:`deflate` of the family's lag-1 correlation between
    runs (``rho``, by family; none: independent runs). Returns ``{family: (S at
    the newest run, runs since S left 0)}``.
    """
    out: dict[str, tuple[float, int]] = {}
    for name, figs in families.items():
        series = [cusum_scores(np.log(np.asarray(v, dtype=float)), b) for v, b in figs
                  if len(v) > CUSUM_START and all(x > 0 for x in v)]
        if not series:
            continue
        n = min(len(s) for s in series)
        z = np.array([s[-n:] for s in series])
        mean = z.mean(axis=0)
        # the mean's variance from the runs before the newest five (a drop in
        # progress must not inflate it)
        ref = mean[:-5] if n - 5 >= 4 else mean
        if z.shape[0] > 1 and ref.size >= 4:
            var = max(float(np.var(ref, ddof=1)), 1.0 / z.shape[0])
            var = min(var, 1.0)
        else:
            var = 1.0
        path = cusum(mean / math.sqrt(var) * deflate((rho or {}).get(name, 0.0)))
        if path and path[-1] > h:
            since = next((i for i in range(len(path) - 1, -1, -1) if path[i] == 0.0), -1)
            out[name] = (path[-1], len(path) - 1 - since)
    return out


def sustained_families(groups: Mapping[tuple[str, str], Sequence[str]],
                       medians: Mapping[str, tuple[Sequence[float], str]],
                       settings: JudgingSettings, h: float = CUSUM_H,
                       rho: Mapping[str, float] | None = None
                       ) -> dict[str, dict[str, Any]]:
    """The sustained rule of a run: the figures of the families (``groups``, as
    ``judging.families`` makes them) whose CUSUM is beyond ``h`` at the newest
    run and that are worse by at least their threshold over the runs since the
    CUSUM left zero. ``medians``: each figure's run medians (accepted history
    since the last accepted level change, the current run last) and better.
    Returns ``{figure: {"index", "change", "p", "runs_after", "before", "after",
    "cusum", "limit"}}`` (``p``: Welch's on the runs before and after).
    ``rho``: each figure's lag-1 correlation between accepted runs
    (:func:`lag1`); a family's is the mean of its figures'."""
    rho = rho or {}
    flagged = cusum_run({f"{case}\0{fam}": [medians[k] for k in keys]
                         for (case, fam), keys in groups.items()}, h,
                        {f"{case}\0{fam}": float(np.mean([rho.get(k, 0.0) for k in keys]))
                         for (case, fam), keys in groups.items()})
    out: dict[str, dict[str, Any]] = {}
    for (case, fam), keys in groups.items():
        hit = flagged.get(f"{case}\0{fam}")
        if hit is None:
            continue
        score, runs = hit
        runs = max(runs, 1)
        for key in keys:
            values, better = medians[key]
            logs = np.log(np.asarray(values, dtype=float))
            if logs.size <= runs + 1:
                continue
            before, after = logs[:-runs], logs[-runs:]
            change = float(np.expm1(after.mean() - before.mean()))
            worse_by = -change if better == "higher" else change
            if worse_by < settings.for_figure(key).threshold:
                continue
            out[key] = {"index": int(logs.size - runs), "change": change,
                        "p": _welch_p(before, after) if runs > 1 else float("nan"),
                        "runs_after": runs, "before": float(np.exp(np.median(before))),
                        "after": float(np.exp(np.median(after))), "cusum": score,
                        "limit": h}
    return out


# ------------------------------------------------------------ run-to-run spread
#: Numbers of newest runs the spread test reads (Bonferroni over them): fewer
#: tries cost less of the level; on seeded normal runs {5, 8, 12} named a doubled
#: spread in 27 % of its 6th-15th runs against 12 % for every m from 5 to 10, at
#: 0.8-3.8 % of clean normal, t(3) and AR(1) 0.8 runs (docs/judging.md).
SPREAD_RUNS = (5, 8, 12)
#: The run-to-run spread grown by at least this factor (and significantly) is named.
SPREAD_GROWTH = 1.5
#: Fewest accepted runs the spread before is read from.
SPREAD_REF = 10


def spread_growth(recent: Sequence[float], reference: Sequence[float], alpha: float = 0.05,
                  rho: float = 0.0) -> dict[str, Any] | None:
    """Whether the run-to-run spread of the newest runs grew against the accepted
    runs before them, or None.

    ``recent``: log run values, oldest first, the current run last (every
    measured run since the last accepted level, called ones included);
    ``reference``: the log run values before the newest ones tried.
    For each number of newest runs ``m`` in :data:`SPREAD_RUNS`, a one-sided
    Brown-Forsythe test (Welch's t on the absolute deviations of each group
    from its own median: a level that moves, and heavy tails, hardly move it)
    that the newest ``m`` scatter more; the smallest p, times the number of
    ``m`` tried (Bonferroni), below ``alpha`` and the sds' ratio at least
    :data:`SPREAD_GROWTH`: ``{"ratio", "low", "high", "runs", "p"}`` (the
    ratio of the sds with its 95 % interval from the F distribution).
    ``rho``: the runs' lag-1 correlation (:func:`lag1`): the absolute
    deviations of an AR(1) are correlated about ``rho^2`` from run to run, so
    the test's t is divided by ``sqrt((1 + rho^2) / (1 - rho^2))`` (the
    standard error of a mean of such deviations against independent ones)."""
    from scipy import stats

    x = np.asarray(recent, dtype=float)
    ref = np.asarray(reference, dtype=float)
    if ref.size < SPREAD_REF or x.size < SPREAD_RUNS[0]:
        return None
    dev_ref = np.abs(ref - np.median(ref))
    r2 = min(max(rho, 0.0), RHO_MAX) ** 2
    inflate = math.sqrt((1 + r2) / (1 - r2))
    tries = [m for m in SPREAD_RUNS if m <= x.size]
    best: tuple[float, int] | None = None
    for m in tries:
        tail = x[-m:]
        dev = np.abs(tail - np.median(tail))
        if np.var(dev) == 0 and np.var(dev_ref) == 0:
            continue
        res = stats.ttest_ind(dev, dev_ref, equal_var=False, alternative="greater")
        p = float(res.pvalue)
        if r2 > 0 and not math.isnan(p):
            p = float(stats.t.sf(float(res.statistic) / inflate, float(res.df)))
        if not math.isnan(p) and (best is None or p < best[0]):
            best = (p, m)
    if best is None:
        return None
    p, m = min(1.0, best[0] * len(tries)), best[1]
    tail = x[-m:]
    var_ref = float(np.var(ref, ddof=1))
    if var_ref <= 0 or p >= alpha:
        return None
    f = float(np.var(tail, ddof=1)) / var_ref
    ratio = math.sqrt(f)
    if ratio < SPREAD_GROWTH:
        return None
    d1, d2 = m - 1, ref.size - 1
    low = math.sqrt(f / float(stats.f.ppf(0.975, d1, d2)))
    high = math.sqrt(f / float(stats.f.ppf(0.025, d1, d2)))
    return {"ratio": ratio, "low": low, "high": high, "runs": m, "p": p}
