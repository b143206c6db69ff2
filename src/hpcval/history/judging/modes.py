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


def split(runs: Sequence[np.ndarray]) -> float | None:
    """The log value between two modes of the pooled samples, or None when the
    samples are not two-moded (see the module's criteria)."""
    y = np.sort(np.concatenate([np.asarray(r, dtype=float) for r in runs])) if runs else None
    if y is None or y.size < 10:
        return None
    n = y.size
    lo_n = max(int(math.ceil(MIN_SHARE * n)), 2)
    best: tuple[float, int] | None = None
    csum, csq = np.cumsum(y), np.cumsum(y * y)
    for k in range(lo_n, n - lo_n + 1):
        a_n, b_n = k, n - k
        ma = csum[k - 1] / a_n
        mb = (csum[-1] - csum[k - 1]) / b_n
        va = max(csq[k - 1] / a_n - ma * ma, 0.0)
        vb = max((csq[-1] - csq[k - 1]) / b_n - mb * mb, 0.0)
        d = math.sqrt(2) * (mb - ma) / math.sqrt(max(va + vb, 1e-12))
        if mb - ma >= math.log(MODE_RATIO) and (best is None or d > best[0]):
            best = (d, k)
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
