"""Two-moded figures: the fast mode and the share of samples in the slow mode.

On a loaded machine a small-message latency is two-moded, within and between
runs: a sample is fast (what the hardware does) or slow (a rank descheduled,
its wake-up). A run's median then jumps between the modes and its run-to-run
spread is a factor of several, so no median-based test resolves anything; the
samples themselves still show a change. For such figures hpcval judges

* the **fast mode**: the median of a run's samples on the fast side of the
  split between the modes (a run wholly in the slow mode: its fast end, the
  10th percentile of a latency, the 90th of a bandwidth); the level and the
  run-to-run spread come from the baseline runs that have fast samples; a
  vanished fast mode moves the current run's value by the modes' ratio;
  ``statistic: fast`` on a figure without two modes judges that quantile,
  with its within-run variance from the order statistics;
* the **slow-mode share**: the fraction of a run's samples beyond the split
  between the modes, against the baseline runs' fractions (their run-to-run
  spread, at least the binomial one); a share that jumped is ``unstable``.

A figure is two-moded when the pooled log samples of its baseline runs split
into two groups at least :data:`MODE_RATIO` apart whose separation (Ashman's D)
is at least :data:`ASHMAN_D`, the smaller holding at least
:data:`MIN_SHARE` of the samples, and at least :data:`MIXED_RUNS` of the runs
hold samples of both (docs/judging.md, "Which statistic").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: The quantile of the fast mode, on the figure's better side.
FAST_QUANTILE = 0.1
#: Two groups of log samples are two modes when their means differ by this factor...
MODE_RATIO = 2.0
#: ... and Ashman's D (sqrt(2) |mu1 - mu2| / sqrt(s1^2 + s2^2)) is at least this
#: (2 is "clean separation"; 3 leaves out a skewed single mode's tail).
ASHMAN_D = 3.0
#: Share of the runs that must hold samples of both modes: the modes are inside
#: runs (whole runs at two levels are a level shift or a placement, which the
#: median judges).
MIXED_RUNS = 0.3
#: Fewest samples in the fast mode from which a run's fast level is read; a run
#: with fewer counts as one without a fast mode (its share decides).
MIN_FAST = 2
#: The smaller mode holds at least this share of the pooled samples.
MIN_SHARE = 0.05
#: A slow-mode share that grew by at least this (absolute, 0-1) and significantly
#: is a change (``unstable``): a fifth more of the samples waiting.
SHARE_THRESHOLD = 0.2


def fast_level(logs: np.ndarray, better: str) -> float:
    """The fast mode of one run's log samples: the quantile on the better side."""
    q = FAST_QUANTILE if better == "lower" else 1 - FAST_QUANTILE
    return float(np.quantile(logs, q))


def fast_var(logs: np.ndarray, better: str) -> float:
    """Variance of :func:`fast_level` from the run's own order statistics: half
    the distance between the samples one binomial sd of ranks either side of
    the quantile, squared (nan with fewer than 3 samples)."""
    n = logs.size
    if n < 3:
        return math.nan
    q = FAST_QUANTILE if better == "lower" else 1 - FAST_QUANTILE
    x = np.sort(logs)
    j = q * (n - 1)
    c = math.sqrt(n * q * (1 - q))
    lo, hi = x[max(int(math.floor(j - c)), 0)], x[min(int(math.ceil(j + c)), n - 1)]
    return float(((hi - lo) / 2) ** 2)


def _best_split(y: np.ndarray, min_n: int, min_gap: float = 0.0) -> tuple[float, int] | None:
    """The split of sorted values ``y`` into ``y[:k]`` and ``y[k:]`` (each at least
    ``min_n`` values, their means at least ``min_gap`` apart) with the largest
    Ashman's D: ``(D, k)``, or None when no split qualifies."""
    n = y.size
    best: tuple[float, int] | None = None
    csum, csq = np.cumsum(y), np.cumsum(y * y)
    for k in range(min_n, n - min_n + 1):
        a_n, b_n = k, n - k
        ma = csum[k - 1] / a_n
        mb = (csum[-1] - csum[k - 1]) / b_n
        va = max(csq[k - 1] / a_n - ma * ma, 0.0)
        vb = max((csq[-1] - csq[k - 1]) / b_n - mb * mb, 0.0)
        d = math.sqrt(2) * (mb - ma) / math.sqrt(max(va + vb, 1e-12))
        if mb - ma >= min_gap and (best is None or d > best[0]):
            best = (d, k)
    return best


def split(runs: Sequence[np.ndarray]) -> float | None:
    """The log value between two modes of the pooled samples, or None when the
    samples are not two-moded (see the module's criteria)."""
    y = np.sort(np.concatenate([np.asarray(r, dtype=float) for r in runs])) if runs else None
    if y is None or y.size < 10:
        return None
    best = _best_split(y, max(int(math.ceil(MIN_SHARE * y.size)), 2), math.log(MODE_RATIO))
    if best is None or best[0] < ASHMAN_D:
        return None
    k = best[1]
    cut = float((y[k - 1] + y[k]) / 2)
    # modes inside runs, not whole runs at two levels (a level shift, or runs
    # placed on a slow node): enough runs hold samples of both
    mixed = sum(1 for r in runs if np.any(np.asarray(r) < cut) and np.any(np.asarray(r) > cut))
    if mixed < max(2, MIXED_RUNS * len(runs)):
        return None
    return cut


def fast_centre(side: np.ndarray, better: str) -> float:
    """The centre of a run's fast-side samples: their median, and of two samples
    the one on the better side: a sample between the modes (a wake-up that came
    early: 77 us beside 10 us on the loaded lab, where the split lay at 127 us)
    is never averaged into the fast level."""
    if side.size == 2:
        return float(side.min() if better == "lower" else side.max())
    return float(np.median(side))


def run_level(logs: np.ndarray, better: str, statistic: str, cut: float | None) -> float:
    """One run's value of the judged statistic, on the scale of ``logs``: its
    median (``statistic`` "median"), or its fast mode: the centre of its samples
    on the fast side of ``cut`` (at least :data:`MIN_FAST` of them; :func:`fast_centre`), else its
    fast end (:func:`fast_level`). The verdict, its level and the sustained
    rule's series all read a run through this."""
    if statistic == "median":
        return float(np.median(logs))
    if cut is not None:
        side = fast_side(logs, cut, better)
        if side.size >= MIN_FAST:
            return fast_centre(side, better)
    return fast_level(logs, better)


def run_values(runs: Sequence[Sequence[float]], better: str, statistic: str = "median",
               split_at: float | None = None, baseline: Sequence[Sequence[float]] = (),
               alpha: float = 0.05) -> list[float | None]:
    """Each run's value of the statistic a verdict judged (``FigureVerdict.statistic``;
    ``split_at``: its ``slow_share["split"]``, the split between the modes in the
    figure's unit), in the figure's unit, oldest first: what the sustained rule
    reads.

    A run of a two-moded figure without a fast mode (fewer than
    :data:`MIN_FAST` samples on the fast side) has its fast end as its value
    where the fast mode is gone: the slow-mode shares of the stretch of
    consecutive such runs it belongs to, each tested against the ``baseline``
    runs' (:func:`share_test`), are significant together at ``alpha / 2``
    (Fisher's combination, runs independent); else None: its fast level is
    unknown (the verdict's ``inconclusive``; a clean run of few samples misses
    the fast mode by chance, and its fast end, a factor of the modes' ratio
    away, would read as a step)."""
    from scipy import stats

    cut = (math.log(split_at) if statistic != "median" and split_at is not None
           and split_at > 0 else None)
    base = [np.log(np.asarray(list(r), dtype=float)) for r in baseline if len(r) > 0]
    out: list[float | None] = []
    p_absent: list[float | None] = []  # share test p of a run without a fast mode
    for r in runs:
        x = np.asarray(list(r), dtype=float)
        p_absent.append(None)
        if statistic == "median" or not np.all(x > 0):
            out.append(float(np.median(x)))
            continue
        logs = np.log(x)
        if cut is not None and base and fast_side(logs, cut, better).size < MIN_FAST:
            test = share_test(base, logs, cut, better)
            p_absent[-1] = test.p if test is not None else None
        out.append(float(np.exp(run_level(logs, better, statistic, cut))))
    i = 0
    while i < len(out):  # each stretch of consecutive runs without a fast mode
        j = i
        while j < len(out) and p_absent[j] is not None:
            j += 1
        if j > i:
            ps = [float(max(p, 1e-300)) for p in p_absent[i:j] if p is not None]
            p = ps[0] if len(ps) == 1 else float(stats.combine_pvalues(ps).pvalue)
            if p >= alpha / 2:
                out[i:j] = [None] * (j - i)
        i = max(j, i + 1)
    return out


def fast_side(logs: np.ndarray, cut: float, better: str) -> np.ndarray:
    """The samples of a run in the fast mode (on the better side of ``cut``)."""
    return logs[logs <= cut] if better == "lower" else logs[logs >= cut]


def slow_share(logs: np.ndarray, cut: float, better: str) -> float:
    """Share of a run's samples in the slow mode (beyond ``cut`` on the worse side)."""
    slow = logs > cut if better == "lower" else logs < cut
    return float(np.mean(slow))


@dataclass(frozen=True)
class ShareTest:
    """The slow-mode share of this run against the baseline runs'."""

    before: float  # mean share of the baseline runs
    now: float
    low: float  # interval of now - before at ``level``
    high: float
    p: float  # one-sided p of growth
    level: float
    split: float  # the split in the figure's unit

    def as_dict(self) -> dict[str, float]:
        return {"before": self.before, "now": self.now, "low": self.low, "high": self.high,
                "p": self.p, "level": self.level, "split": self.split}


def share_test(runs: Sequence[np.ndarray], current: np.ndarray, cut: float, better: str,
               level: float = 0.95) -> ShareTest | None:
    """The current run's slow-mode share against the baseline runs' shares: its
    p from a beta-binomial fitted to the baseline runs' shares (their run-to-run
    spread), the interval of the difference a t prediction interval (df = runs -
    1) from the same spread, at least the binomial one (samples inside a run are
    taken as independent)."""
    from scipy import stats

    shares = np.array([slow_share(np.asarray(r), cut, better) for r in runs])
    m = shares.size
    if m < 2:
        return None
    p0 = float(shares.mean())
    n_c = current.size
    n_b = float(np.mean([len(r) for r in runs]))
    binom = max(p0 * (1 - p0), 1 / (4 * n_b)) / n_b  # never zero: a share of 0 is no certainty
    var_run = max(float(np.var(shares, ddof=1)), binom)
    var_cur = max(p0 * (1 - p0), 1 / (4 * n_c)) / n_c
    se = math.sqrt(max(var_run - binom, 0.0) + var_cur + var_run / m)
    now = slow_share(current, cut, better)
    q = float(stats.t.ppf(0.5 + level / 2, m - 1))
    return ShareTest(p0, now, now - p0 - q * se, now - p0 + q * se,
                     _betabinom_p(shares, n_b, now, n_c), level, float(math.exp(cut)))


def _betabinom_p(shares: np.ndarray, n_b: float, now: float, n_c: int) -> float:
    """P(a run of ``n_c`` samples has at least ``now * n_c`` slow ones) under a
    beta-binomial fitted to the baseline shares by moments (the slow-mode share
    varies from run to run; counts of few samples are skewed, which a normal
    approximation misses: 5 % false alarms at a nominal 2.5 % on simulated runs)."""
    from scipy import stats

    p0 = (float(np.sum(shares)) * n_b + 0.5) / (shares.size * n_b + 1)  # never 0 or 1
    var = float(np.var(shares, ddof=1))
    n = max(n_b, 2.0)
    rho = (var * n / (p0 * (1 - p0)) - 1) / (n - 1)
    rho = min(max(rho, 1e-6), 0.99)
    total = 1 / rho - 1
    x = int(round(now * n_c))
    return float(stats.betabinom.sf(x - 1, n_c, p0 * total, (1 - p0) * total))


#: The widest threshold one run may need before its figure counts as one that a
#: single run cannot judge (its runs jump between levels): an ``inconclusive``
#: verdict on such a figure holds its run (docs/judging.md, "Held runs").
SANE_THRESHOLD = 0.5


def hold_reason(outcome: str, change: float | None, needed_threshold: float | None,
                hold_factor: float) -> str | None:
    """Why a run is not accepted into baselines automatically for this figure,
    or None: the figure moved by ``hold_factor`` or more either way (and was
    not called: a called run is out anyway), or it is ``inconclusive`` on a
    figure whose noise one run cannot resolve below :data:`SANE_THRESHOLD`."""
    if outcome in ("no-baseline", "regressed", "unstable") or change is None:
        return None
    ratio = 1 + change
    if hold_factor > 1 and ratio > 0 and abs(math.log(ratio)) >= math.log(hold_factor):
        return f"moved {_g3(ratio)}x (hold_factor {hold_factor:g})"
    if outcome == "inconclusive" and needed_threshold is not None \
            and needed_threshold > SANE_THRESHOLD:
        return (f"inconclusive where one run resolves only {_g3(100 * needed_threshold)} %")
    return None


def _g3(v: float) -> str:
    return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"


# --------------------------------------------------------------- modes between runs
#: A figure's run values (one per run, the judged statistic, log scale) are
#: two-moded between runs (whole runs in a slow mode: a slow node in the pool,
#: a placement) when their best split has Ashman's D at least this. The split is
#: chosen among n - 1 places in few values, which inflates D: sets of 19 and 30
#: normal, t(3), drifting and fast-mode run values reached D = 6 in at most 1 of
#: 300, whole runs 25 % slow (30 % of the runs) in 284 of 300 (19 runs) and 297
#: of 300 (30 runs) (``bench/noise_shapes.py --ashman 19 30``).
RUNS_ASHMAN_D = 6.0
#: The smaller group holds at least this share of the runs, and at least
#: :data:`RUNS_MIN_GROUP` of them (with 2, two far runs of t(3) noise among 19
#: made D >= 6 in 7 of 300 sets).
RUNS_MIN_SHARE = 0.1
RUNS_MIN_GROUP = 3
#: Fewest runs the between-runs test reads.
RUNS_MIN = 10


def runs_ashman_d(values: Sequence[float]) -> float | None:
    """Ashman's D of the best split of run values (None: fewer than
    :data:`RUNS_MIN` values)."""
    y = np.sort(np.asarray(values, dtype=float))
    if y.size < RUNS_MIN:
        return None
    best = _best_split(y, max(int(math.ceil(RUNS_MIN_SHARE * y.size)), RUNS_MIN_GROUP))
    return None if best is None else best[0]


def between_runs(values: Sequence[float]) -> bool:
    """The run values are two-moded between runs (:data:`RUNS_ASHMAN_D`)."""
    d = runs_ashman_d(values)
    return d is not None and d >= RUNS_ASHMAN_D


def rank_p(values: Sequence[float], current: float, better: str) -> float:
    """Distribution-free p of the current run's value against the accepted runs'
    ``values``: ``(1 + runs at least as bad) / (n + 1)``. Under exchangeability
    (the current run drawn like the accepted ones, whatever their distribution)
    P(p <= r / (n + 1)) = r / (n + 1): the new run lies beyond the r-th worst of
    n with that probability."""
    x = np.asarray(values, dtype=float)
    worse = x <= current if better == "higher" else x >= current
    return float((1 + int(np.sum(worse))) / (x.size + 1))
