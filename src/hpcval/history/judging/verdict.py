"""The decision: one figure's verdict from its assessment and its family's
test, and judging a whole run (:func:`judge_run`). The model is described in
:mod:`hpcval.history.judging.model` and docs/judging.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from hpcval.history.judging.families import (
    _correlation,
    _Family,
    _family_p,
    _levels,
    _normal_score,
    adjust,
    effective_figures,
    families,
    holm,
    holm_levels,
    stouffer,
)
from hpcval.history.judging.model import (
    MEAN_SHARE,
    OUTCOMES,
    FigureData,
    FigureVerdict,
    _assess,
    _Assessment,
    _relative,
    _stats,
    _threshold_better,
    _threshold_on_scale,
)
from hpcval.history.judging.modes import SHARE_THRESHOLD
from hpcval.history.judging.needed import _needed, _needed_text, _pct, _t_quantile
from hpcval.history.judging.settings import FigureSettings, JudgingSettings

#: A run without a fast level whose slow-mode share test gives a p below this
#: (not significant at the verdict's level) is held, not accepted: a clean run
#: misses its fast mode by chance with a share near its baseline's.
SHARE_LEANS = 0.25


def _decide(a: _Assessment, fam: _Family, unstable_p: float | None) -> FigureVerdict:
    fs = a.settings
    change: float | None = _relative(a, a.diff)
    worse_by = -change if a.better == "higher" else change  # type: ignore[operator]
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
    ci_low: float | None
    ci_high: float | None
    ci_low, ci_high = sorted((_relative(a, lo), _relative(a, hi)))
    sign = 1.0 if a.better == "lower" else -1.0  # worse = sign * diff > 0
    near_worse = min(sign * lo, sign * hi)  # the interval's end nearest to no change
    beyond = near_worse >= _threshold_on_scale(a) if worse_by > 0 else False
    near_better = min(-sign * lo, -sign * hi)
    beyond_better = near_better >= _threshold_better(a) if worse_by < 0 else False
    sig_worse = (rej_worse and a.p_worse < a_worse) or beyond
    # runs two-moded between runs: also beyond the empirical prediction bound of
    # the accepted runs, where n runs can form one at this level (n + 1 >= 1 / level)
    ranked_in = (a.rank is not None and a.rank[0] > a_worse
                 and (a.rank[1] + 1) * a_worse >= 1)
    within_runs = sig_worse and worse_by >= fs.threshold and ranked_in
    sig_worse = sig_worse and not ranked_in
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
    share = a.share
    # two tests of a two-moded figure (its fast mode, its slow-mode share): the
    # share's at half the level (Bonferroni), so that a clean run stays at alpha
    share_jumped = (share is not None and share.p < fs.alpha / 2 and share.low > 0
                    and share.now - share.before >= SHARE_THRESHOLD)
    if a.fast_absent and share is not None and share.p >= fs.alpha / 2:
        # fewer than two samples in the fast mode, not significantly more often
        # than clean runs (clean runs of 5 samples on the loaded lab: 3 of 10): no
        # fast level to judge and no change to state. Where the share leans to a
        # vanished mode (p < SHARE_LEANS) the run is `inconclusive` and held out of
        # the baselines (run.holds), so that runs whose fast mode is gone are not
        # absorbed one by one; the sustained rule judges such runs together
        leans = share.p < SHARE_LEANS
        outcome, change, ci_low, ci_high = ("inconclusive" if leans else "pass"), None, None, None
        note = (f"no fast level in this run: {share.now:.0%} of the samples beyond "
                f"{share.split:.4g} (slow-mode share {share.before:.0%} before, "
                f"p={share.p:.2g}); more samples per run show the fast mode")
    elif a.fast_absent and share is not None:
        # no sample in the fast mode, more often than clean runs: the mode is gone
        outcome = "regressed"
        note = (f"fast mode gone: {share.now:.0%} of the samples beyond {share.split:.4g} "
                f"(slow-mode share {share.before:.0%} before, p={share.p:.2g})")
    elif sig_worse and worse_by >= fs.threshold:
        outcome, note = "regressed", f"worse by {worse_by:.1%}, beyond the {pct} threshold"
        if not rej_worse:
            note += " (its interval lies wholly beyond it)"
    elif unstable:
        outcome = "unstable"
        note = (f"within-run spread {disp['current']:.1%} vs {disp['baseline']:.1%} "
                f"({disp['ratio']:.1f}x, p={unstable_p:.2g})")
    elif share_jumped:
        outcome = "unstable"
        note = (f"slow-mode share {share.before:.0%} -> {share.now:.0%} "
                f"(+{100 * share.low:.0f} .. +{100 * share.high:.0f} points, "
                f"p={share.p:.2g}): samples beyond {share.split:.4g} wait")
    elif sig_worse:
        outcome, note = "warn", f"worse by {worse_by:.1%}: significant, within the {pct} threshold"
    elif sig_better and -worse_by >= fs.threshold:
        outcome, note = "improved", f"better by {-worse_by:.1%}, beyond the {pct} threshold"
    elif within_runs and a.rank is not None:
        outcome = "inconclusive"
        bad = round(a.rank[0] * (a.rank[1] + 1)) - 1
        note = (f"worse by {worse_by:.1%} but the accepted runs are two-moded between runs "
                f"and {bad} of their {a.rank[1]} were as far (p={a.rank[0]:.2g} by rank); "
                "the sustained rule judges the runs that follow")
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
        statistic=a.statistic, slow_share=share.as_dict() if share is not None else None,
    )


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
