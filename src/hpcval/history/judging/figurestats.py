"""The statistics of one figure (or one family's averaged figure) in a
before/after comparison (:mod:`hpcval.history.judging.compare`): each run's
log median and the within-run variance of a median (:func:`_medians`),
Welch's (or the paired) interval and one-sided tests on the difference of the
sides' mean log medians (:func:`welch`, :class:`Welch`), the same on a
family's per-run mean (:func:`_aggregate`), and how many runs per side make
the interval a given width (:func:`runs_needed`). Student's t from
``scipy.stats``; what each assumes: docs/compare.md."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from hpcval.core.errors import InputError
from hpcval.history.judging.model import MEDIAN_EFFICIENCY

#: the most runs per side ``needed`` reports (beyond: "more than this")
MOST_RUNS = 1000


def _stats():  # noqa: ANN202 - scipy.stats, imported on first use
    from scipy import stats

    return stats


class FigurePair(NamedTuple):
    """One figure on both sides: the samples of each run (one list per run).

    ``a_ids``/``b_ids`` name the runs (the runs of a family's figures are
    matched by them; default: their positions); ``size`` is the message size in
    bytes where the figure has one; ``spread`` is the site's run-to-run spread
    of this figure (sd of log run medians, from its history) where known: with
    one run per side it is what ``needed`` is computed from."""

    a_runs: Sequence[Sequence[float]]
    b_runs: Sequence[Sequence[float]]
    better: str
    unit: str = ""
    size: float | None = None
    a_ids: Sequence[str] = ()
    b_ids: Sequence[str] = ()
    spread: float | None = None
    #: degrees of freedom of ``spread`` (its runs less its levels); with at
    #: least 1, each side's own spread is pooled with it (:func:`welch`)
    spread_df: int = 0


class Welch(NamedTuple):
    """A difference of means of log run medians, B - A, with what its interval needs."""

    diff: float
    #: standard error (None: one run per side, no interval)
    se: float | None
    df: float | None
    var_a: float | None
    var_b: float | None

    def interval(self, level: float) -> tuple[float, float] | None:
        """Two-sided interval of ``diff`` at confidence ``level`` (log scale)."""
        if self.se is None or self.df is None:
            return None
        q = float(_stats().t.ppf(0.5 + level / 2, self.df))
        return self.diff - q * self.se, self.diff + q * self.se

    def p_lower(self) -> float | None:
        """One-sided p of "B is not lower than A"."""
        if self.se is None or self.df is None:
            return None
        if self.se == 0:
            return 0.0 if self.diff < 0 else 1.0
        return float(_stats().t.cdf(self.diff / self.se, self.df))

    def p_higher(self) -> float | None:
        p = self.p_lower()
        return None if p is None else 1.0 - p

    def p_equivalent(self, margin: float) -> float | None:
        """Two one-sided tests: p of "the ratio lies outside [1 - margin, 1 + margin]"."""
        if self.se is None or self.df is None:
            return None
        lo, hi = math.log1p(-margin), math.log1p(margin)
        t = _stats().t
        if self.se == 0:
            return 0.0 if lo < self.diff < hi else 1.0
        return max(float(t.sf((self.diff - lo) / self.se, self.df)),
                   float(t.cdf((self.diff - hi) / self.se, self.df)))


def welch(a: Sequence[float], b: Sequence[float], floor_a: float = 0.0,
          floor_b: float = 0.0, paired: bool = False,
          prior: tuple[float, int] | None = None) -> Welch:
    """Welch's comparison of two sets of log run medians (B - A). Each side's
    variance is at least its ``floor``; a side with one run takes the other's
    variance and degrees of freedom; one run on each side: no interval.

    ``prior``: the site's run-to-run variance of this figure and its degrees of
    freedom, from runs on neither side. Each side's own variance is then pooled
    with it, weighted by degrees of freedom (``((n-1) s^2 + df_h s_h^2) / (n-1 +
    df_h)`` with ``n-1 + df_h`` degrees of freedom; a side with one run takes
    the site's), and Welch-Satterthwaite combines the sides' degrees of freedom.
    Without it, the result is ``scipy.stats.ttest_ind(equal_var=False)``'s.

    ``paired``: ``a[i]`` and ``b[i]`` come from the same run (other cases of it,
    e.g. two MPI stacks): Student's paired t on the differences, their variance
    at least ``floor_a + floor_b`` (the run's shared conditions cancel; the
    site's spread is not a spread of differences, so ``prior`` is not used)."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        raise InputError("compare: a side has no run of this figure")
    diff = float(xb.mean() - xa.mean())
    if paired and xa.size == xb.size:
        n = xa.size
        if n < 2:
            return Welch(diff, None, None, None, None)
        vd = max(float(np.var(xb - xa, ddof=1)), floor_a + floor_b)
        # var_a = var_b = vd / 2: what runs_needed reads as "(var_a + var_b) / n"
        return Welch(diff, math.sqrt(vd / n), float(n - 1), vd / 2, vd / 2)
    na, nb = xa.size, xb.size
    if na < 2 and nb < 2:
        return Welch(diff, None, None, None, None)
    pooled = prior is not None and prior[1] >= 1 and math.isfinite(prior[0])
    if pooled:
        assert prior is not None
        va, dfa = _pooled(xa, prior, floor_a)
        vb, dfb = _pooled(xb, prior, floor_b)
    else:
        va, dfa = (max(float(xa.var(ddof=1)), floor_a), float(na - 1)) if na >= 2 \
            else (math.nan, 0.0)
        vb, dfb = (max(float(xb.var(ddof=1)), floor_b), float(nb - 1)) if nb >= 2 \
            else (math.nan, 0.0)
        if na < 2:
            va, dfa = max(vb, floor_a), dfb
        elif nb < 2:
            vb, dfb = max(va, floor_b), dfa
    ua, ub = va / na, vb / nb
    if not pooled and (na < 2 or nb < 2):  # one side's spread borrowed: its df
        df = dfb if na < 2 else dfa
    else:
        df = (ua + ub) ** 2 / (ua * ua / dfa + ub * ub / dfb) if ua + ub > 0 \
            else dfa + dfb
    se = math.sqrt(ua + ub)
    return Welch(diff, se, df, va, vb)


#: A side whose own spread is larger than the site's at this one-sided level
#: (F test) is not pooled with it: it spreads more than the site's history.
POOL_F_LEVEL = 0.1


def _pooled(x: np.ndarray, prior: tuple[float, int], floor: float) -> tuple[float, float]:
    """A side's variance pooled with the site's (``prior``: variance, degrees of
    freedom), weighted by degrees of freedom, then floored; and its degrees of
    freedom. A side whose own variance is larger than the site's (one-sided F
    test at ``POOL_F_LEVEL``) keeps its own: pooling assumes it spreads as the
    site's runs do, and a slowed link that spreads more would be understated."""
    own_df = x.size - 1
    own = float(x.var(ddof=1)) if own_df >= 1 else 0.0
    if own_df >= 1 and prior[0] > 0 and own > prior[0]:
        from scipy import stats

        if float(stats.f.sf(own / prior[0], own_df, prior[1])) < POOL_F_LEVEL:
            return max(own, floor), float(own_df)
    df = own_df + prior[1]
    return max((own_df * own + prior[1] * prior[0]) / df, floor), float(df)


def runs_needed(var_a: float, var_b: float, margin: float, alpha: float = 0.05,
                power: float = 0.8) -> int | None:
    """Runs per side with which a B no different from A is ``same`` (its
    interval at ``1 - 2 alpha`` inside ``+-margin``) in ``power`` of comparisons,
    at these variances of log run medians (None: more than ``MOST_RUNS``)."""
    half = math.log1p(margin)
    stats = _stats()
    t = stats.t
    # the normal quantiles give a lower bound (t's are larger): start there
    z = float(stats.norm.ppf(1 - alpha) + stats.norm.ppf(0.5 + power / 2))
    start = max(2, math.ceil(z * z * (var_a + var_b) / (half * half)))
    for n in range(start, MOST_RUNS + 1):
        q = float(t.ppf(1 - alpha, 2 * n - 2) + t.ppf(0.5 + power / 2, 2 * n - 2))
        if q * math.sqrt((var_a + var_b) / n) <= half:
            return n
    return None


def runs_to_detect(var_a: float, var_b: float, diff: float, alpha: float = 0.05,
                   power: float = 0.8) -> int | None:
    """Runs per side with which a real change of ``diff`` (log scale) is called
    ``worse`` or ``better`` (one-sided at ``alpha``) in ``power`` of comparisons,
    at these variances of log run medians (None: more than ``MOST_RUNS``)."""
    if not diff:
        return None
    t = _stats().t
    for n in range(2, MOST_RUNS + 1):
        q = float(t.ppf(1 - alpha, 2 * n - 2) + t.ppf(power, 2 * n - 2))
        if q * math.sqrt((var_a + var_b) / n) <= abs(diff):
            return n
    return None


def _medians(runs: Sequence[Sequence[float]], what: str) -> tuple[np.ndarray, float]:
    """Log run medians and the mean within-run variance of a median (log scale)."""
    meds, within = [], []
    for i, r in enumerate(runs):
        x = np.asarray(list(r), dtype=float)
        if x.size == 0:
            raise InputError(f"{what}: run {i} has no samples")
        if not np.all(np.isfinite(x)) or np.any(x <= 0):
            raise InputError(f"{what}: run {i}: samples must be positive finite numbers "
                             "(compared as ratios)")
        lx = np.log(x)
        meds.append(float(np.median(lx)))
        if x.size >= 2:
            mad = 1.4826 * float(np.median(np.abs(lx - np.median(lx))))
            sd = mad if mad > 0 else float(np.std(lx, ddof=1))
            within.append(MEDIAN_EFFICIENCY * sd * sd / x.size)
    return np.asarray(meds), float(np.mean(within)) if within else 0.0


class _Prepared(NamedTuple):
    pair: FigurePair
    ma: np.ndarray
    mb: np.ndarray
    floor_a: float
    floor_b: float
    welch: Welch


def _prepare(name: str, pair: FigurePair, min_spread: float) -> _Prepared:
    if pair.better not in ("higher", "lower"):
        raise InputError(f"{name}: better: '{pair.better}' must be 'higher' or 'lower'")
    ma, wa = _medians(pair.a_runs, f"{name}: side A")
    mb, wb = _medians(pair.b_runs, f"{name}: side B")
    fa, fb = max(wa, min_spread ** 2), max(wb, min_spread ** 2)
    return _Prepared(pair, ma, mb, fa, fb,
                     welch(ma, mb, fa, fb, paired=_paired(pair), prior=_prior([pair])))


def _prior(pairs: Sequence[FigurePair]) -> tuple[float, int] | None:
    """The site's run-to-run variance and its degrees of freedom for these
    figures (one: its own; several, a family's per-run mean: the square of the
    mean of their spreads, which bounds the sd of a mean from above whatever
    their correlation, with the fewest degrees of freedom); None where a figure
    has none."""
    if not pairs or any(not p.spread or p.spread_df < 1 for p in pairs):
        return None
    sd = float(np.mean([float(p.spread) for p in pairs]))  # type: ignore[arg-type]
    return sd * sd, min(p.spread_df for p in pairs)


def _paired(pair: FigurePair) -> bool:
    """Both sides' values come from the same runs, in the same order."""
    return bool(pair.a_ids) and list(pair.a_ids) == list(pair.b_ids) \
        and len(pair.a_runs) == len(pair.b_runs) == len(pair.a_ids)


def _ids(ids: Sequence[str], n: int) -> list[str]:
    return list(ids) if len(ids) == n else [str(i) for i in range(n)]


def _aggregate(members: Sequence[_Prepared], sign: Sequence[float]) -> Welch | None:
    """Welch on each run's mean (signed) log median over ``members``, over the
    runs every member has; None when no run has all of them on a side."""
    sides = []
    commons = []
    for side in ("a", "b"):
        per: list[dict[str, float]] = []
        for m, s in zip(members, sign, strict=True):
            meds = m.ma if side == "a" else m.mb
            ids = _ids(m.pair.a_ids if side == "a" else m.pair.b_ids, meds.size)
            per.append({i: s * float(v) for i, v in zip(ids, meds, strict=True)})
        common = [i for i in per[0] if all(i in p for p in per[1:])]
        if not common:
            return None
        commons.append(common)
        sides.append([float(np.mean([p[i] for p in per])) for i in common])
    floor_a = min(m.floor_a for m in members)
    floor_b = min(m.floor_b for m in members)
    paired = all(_paired(m.pair) for m in members) and commons[0] == commons[1]
    return welch(sides[0], sides[1], floor_a, floor_b, paired=paired,
                 prior=_prior([m.pair for m in members]))
