"""The decision of a run against its history, without the store: the window
each figure is judged against, the single-run verdicts (``judge_run``), the
sustained rule, what a verdict becomes once the sustained rule has read the
runs before it, whether the run is accepted or held. :func:`decide` is what
``hpcval validate`` runs (:func:`hpcval.run.verdicts.store_and_judge` reads the
store, calls it and writes what it returns); ``bench/noise_shapes.py`` runs the
same function on simulated histories."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hpcval.history.records import HistoryPoint
from hpcval.run.holds import figure_name, hold_reasons

#: Outcomes that fail the run (``unstable`` unless judging.yaml says
#: ``unstable_fails: false``).
FAILING = {"regressed", "unstable"}
#: Share of a clean run's false-alarm budget ``alpha`` spent by the single-run
#: verdicts; the run-to-run spread test and the sustained rule spend the rest.
SINGLE_SHARE = 0.7
#: A grown run-to-run spread is named only where the newest this many runs
#: hold one beyond the threshold above the level and one below it.
BOTH_WAYS_RUNS = 5
#: The spread test's alpha for a run whose level verdict is already beyond its
#: threshold (``regressed`` or ``improved``): it only names the alarm, as a
#: grown run-to-run spread (``unstable``) where the run lies within the wider
#: spread, or as a move of the level.
SPREAD_NAMING_ALPHA = 0.25
#: Fewest accepted runs whose range says that a run lies within what they held.
WITHIN_RUNS = 10


@dataclass
class Decision:
    """What judging one run decided (nothing written yet)."""

    verdicts: list[tuple[str, str, str, dict[str, Any]]] = field(default_factory=list)
    result: str = ""
    accepted: bool = False
    hold: dict[str, Any] | None = None
    regressed: bool = False
    #: figure name -> (case key, variable, unit, history, samples, better)
    where: dict[str, tuple[str, str, str, list[HistoryPoint], list[float], str]] = field(
        default_factory=dict)


def decide(settings: Any, run_id: str, cases: Iterable[Any],
           histories: Mapping[tuple[str, str], list[HistoryPoint]],
           holds: Mapping[str, dict[str, Any]], *, run_result: str = "pass",
           run_accepted: bool = True) -> Decision:
    """Judge run ``run_id``'s ``cases`` (``history.records.CaseRecord``) against
    ``histories`` (each figure's stored points before this run, oldest first,
    as ``Store.history_of`` returns them) and the store's ``holds``."""
    from hpcval.history import judging

    level_runs = frozenset(r for r, h in holds.items() if h.get("state") == "accepted")
    pending = frozenset(r for r, h in holds.items() if h.get("state") == "held")
    rejected = frozenset(r for r, h in holds.items() if h.get("state") == "rejected")
    figures: dict[str, Any] = {}
    where: dict[str, tuple[str, str, str, list[HistoryPoint], list[float], str]] = {}
    for case in cases:
        if case.result != "pass" and case.fail_phase != "performance":
            continue  # failed before its figures: judged by its failure alone
        for fig in case.figures:
            if not fig.samples:
                continue
            name = figure_name(case.key, fig.variable)
            fs = settings.for_figure(name)
            hist = histories.get((case.key, fig.variable), [])
            runs, starts = window(hist, max(fs.spread_runs, fs.k), level_runs)
            figures[name] = judging.FigureData(runs, fig.samples, fig.better, fig.unit, starts,
                                               _gap(hist, rejected))
            where[name] = (case.key, fig.variable, fig.unit, hist, fig.samples, fig.better)
    results = judging.judge_run(figures, _single_run(settings))
    # a worse level held over the last runs: Page's CUSUM on each family's
    # self-started scores (docs/judging.md)
    # each figure's lag-1 correlation between accepted runs, read once: the
    # sustained rule, the spread tests and the forecast behind called runs use it
    rho = {name: _rho(figures[name], results.get(name)) for name in where}
    sustained, _series = _sustained(judging, figures, where, settings, run_id, level_runs,
                                   pending, results, rho, rejected)
    out = Decision(where=where)
    for name, verdict in results.items():
        case_key, variable, unit, hist, current, _better = where[name]
        outcome, detail = verdict.outcome, _as_dict(verdict, unit)
        cp = sustained.get(name)
        fs = settings.for_figure(name)
        every = _medians(hist, current, run_id, level_runs, pending, verdict,
                         figures[name].baseline_runs, fs.alpha, rejected, fs.k, True)
        judged = outcome != "no-baseline" and not str(verdict.note).startswith(
            "fast mode gone")
        grown = _grown(every, fs, rho[name]) if judged else None
        if grown is None and judged and outcome in ("regressed", "improved"):
            # a run already beyond its threshold is an alarm either way: which
            # one (the level moved, or the spread grew) is read at a looser
            # alpha, at no cost to clean runs (docs/judging.md)
            grown = _names_spread(every, fs, rho[name])
        if grown is not None and not _both_ways(every[0][-BOTH_WAYS_RUNS:], detail):
            grown = None  # runs beyond the level one way only: the level moved
        if grown is not None and not _beyond(detail, grown["ratio"]):
            # the run-to-run spread grew, the level held: named as such, not as
            # a move of the level (a regression or improvement within the new
            # spread, or a CUSUM that the wider scatter alone drove)
            cp = None
            outcome = "unstable"
            detail["run_spread"] = grown
            detail["note"] = (f"run-to-run spread x{grown['ratio']:.2f} [{grown['low']:.2f} .. "
                              f"{grown['high']:.2f}] since {grown['since']} ({grown['runs']} "
                              f"runs, p={grown['p']:.2g}); the level holds within it")
        if cp is not None and outcome == "regressed" and cp.get("runs_after", 0) < 2:
            cp = None  # called on its own: one run is no "sustained since" (itself)
        if cp is not None and _back(detail.get("current_median"), cp):
            cp = None  # this run is nearer the old level than the worse one: it came back
        if cp is not None and outcome != "no-baseline":
            # the figure has stayed beyond its old level since run cp["since"]
            detail["sustained"] = cp
            if outcome != "regressed":
                outcome = "regressed"
                detail["note"] = (f"sustained: the level moved from {cp['before']:.4g} to "
                                  f"{cp['after']:.4g} {unit} ({100 * cp['change']:+.1f} %) "
                                  f"over the last {cp['runs_after']} runs (CUSUM "
                                  f"{cp['cusum']:.1f} > {cp['limit']:g}; Welch p = "
                                  f"{cp['p']:.2g})")
        if outcome == "regressed" and (figures[name].gap or 0) >= 1:
            # behind runs called or held: where runs depend on each other the
            # level may have wandered with them; within the AR(1) forecast from
            # the newest of them the run is held for a person, not called
            follows = _follows(figures[name], verdict, every, fs.alpha, rho[name])
            if follows is not None:
                outcome = "inconclusive"
                detail.pop("sustained", None)
                detail["follows"] = follows
                detail["note"] = (f"follows the called run {follows['after']}: within the "
                                  f"level's wander from it (lag-1 correlation "
                                  f"{follows['rho']:.2f}, p={follows['p']:.2g}); held until "
                                  "a run comes back or a person decides")
        within = _within_accepted(figures[name].baseline_runs, current)
        if within is not None:
            detail["within_accepted"] = within
        out.verdicts.append((case_key, variable, outcome, detail))
    failing = FAILING if settings.unstable_fails else {"regressed"}
    out.regressed = any(o in failing for _, _, o, _ in out.verdicts)
    out.result = run_result
    if out.regressed:
        out.result = ("regressed" if any(o == "regressed" for _, _, o, _ in out.verdicts)
                      else "unstable")
    reasons = [] if out.regressed or not run_accepted else hold_reasons(out.verdicts, settings)
    out.hold = ({"state": "held", "reasons": [r for r, _ in reasons],
                 "figures": [list(f) for _, f in reasons]} if reasons else None)
    out.accepted = run_accepted and not out.regressed and out.hold is None
    return out


def _single_run(settings: Any) -> Any:
    """The settings the single-run verdicts (``judge_run``) are judged at: every
    ``alpha`` (the default and each figure's override) times
    :data:`SINGLE_SHARE`, the share of a clean run's false-alarm budget left to
    them; the spread test and the sustained rule spend the rest
    (docs/judging.md, "One false-alarm budget for every rule")."""
    overrides = tuple((pattern, {**values, "alpha": values["alpha"] * SINGLE_SHARE}
                       if "alpha" in values else values)
                      for pattern, values in settings.overrides)
    return replace(settings, alpha=settings.alpha * SINGLE_SHARE, overrides=overrides)


def window(points: list[HistoryPoint], n: int, level_runs: frozenset[str] = frozenset()
           ) -> tuple[list[list[float]], list[int]]:
    """Samples of the last ``n`` accepted runs of one figure (oldest first: the
    spread's window, the level from its last K) and the indexes where a new level
    begins: a run judged ``regressed``, or held (``level_runs``), that a person
    accepted (``hpcval history --accept``) starts one; the spread is pooled
    within levels."""
    accepted = [p for p in points if p.accepted and p.measured and p.samples][-n:]
    starts = [i for i, p in enumerate(accepted)
              if i > 0 and (p.run_result == "regressed" or p.run_id in level_runs)]
    return [p.samples for p in accepted], starts


def baselines(points: list[HistoryPoint], k: int) -> list[list[float]]:
    """Samples of the last ``k`` accepted runs of one figure (oldest first):
    runs not left out of baselines, in which the figure was measured (its case
    passed, or failed only its reference band)."""
    accepted = [p for p in points if p.accepted and p.measured and p.samples]
    return [p.samples for p in accepted[-k:]]


def _as_dict(v: Any, unit: str) -> dict[str, Any]:
    d = {k: getattr(v, k) for k in ("better", "baseline_median", "current_median", "change",
                                    "ci_low", "ci_high", "p_value", "p_adjusted", "note",
                                    "threshold", "baseline_runs", "samples", "family",
                                    "spread", "spread_runs", "level_runs", "dispersion",
                                    "ci_level", "statistic", "slow_share")}
    d["unit"] = unit
    if v.needed is not None:
        d["needed"] = v.needed._asdict()
    return d


def _medians(points: list[HistoryPoint], current: list[float], run_id: str,
             level_runs: frozenset[str] = frozenset(), pending: frozenset[str] = frozenset(),
             verdict: Any = None, baseline: Sequence[Sequence[float]] = (),
             alpha: float = 0.05, rejected: frozenset[str] = frozenset(), k: int = 5,
             keep_transients: bool = False) -> tuple[list[float], list[str]]:
    """Run values of a figure since its last accepted level, oldest first, this
    run last, with their run ids (what the sustained rule reads: docs/judging.md):
    the statistic its ``verdict`` judged (the median, or the fast mode of a
    two-moded figure, against the ``baseline`` window's slow-mode share:
    ``judging.modes.run_values``; a run whose fast level is unknown is left out,
    and when it is this run the series is empty). Every measured run counts,
    the ones called ``regressed``, ``unstable`` or held and not yet decided
    (``pending``) included (a sustained cut is called run after run and must
    still add up); runs a person left out (``rejected``: ``hpcval history
    --reject``), held runs the old level came back after, and interrupted runs
    do not."""
    from hpcval.history.judging.modes import run_values

    kept = [p for p in points if p.measured and p.samples and p.run_id not in rejected
            and (p.accepted or p.run_result in ("regressed", "unstable")
                 or p.run_id in pending)]
    # a run judged `regressed` (or held) that a person then accepted (`hpcval
    # history --accept`) is the first run of a new level: the step before it is
    # acknowledged, so the rule looks only at the runs from there on
    for i in range(len(kept) - 1, -1, -1):
        if kept[i].accepted and (kept[i].run_result == "regressed"
                                 or kept[i].run_id in level_runs):
            kept = kept[i:]
            break
    statistic = getattr(verdict, "statistic", "median")
    share = getattr(verdict, "slow_share", None)
    split_at = share.get("split") if isinstance(share, dict) else None
    better = getattr(verdict, "better", "higher")
    values = run_values([p.samples for p in kept] + [current], better, statistic, split_at,
                        baseline, alpha)
    if values[-1] is None:
        return [], []
    ids = [p.run_id for p in kept] + [run_id]
    out = ([False] * len(values) if keep_transients else
           transients([p.accepted or p.run_result == "unstable" for p in kept] + [True],
                      values, k))
    pairs = [(v, i) for v, i, t in zip(values, ids, out, strict=True)
             if v is not None and not t]
    return [v for v, _ in pairs], [i for _, i in pairs]


def transients(accepted: Sequence[bool], values: Sequence[float | None], k: int = 5
               ) -> list[bool]:
    """Which runs of a series (oldest first, the current run last) are
    transients: a run not accepted (called worse, or held; ``accepted`` is True
    for the runs that are not candidates) after which some run came
    back, its value nearer the old level (the mean of the last ``k`` accepted
    runs before the called one, log scale) than the called run's. A bad night
    that is not repeated then leaves the series the sustained rule reads, as a
    held run the old level came back after leaves the baselines: the clean runs
    after it are not flagged for it. A cut that stays keeps every run (a run
    after it nearer the old level than it is the noise of a cut near the
    threshold; the single-run verdicts and the runs that stay judge it)."""
    logs = [math.log(v) if isinstance(v, int | float) and v > 0 else None for v in values]
    out = [False] * len(logs)
    for i, (ok, x) in enumerate(zip(accepted, logs, strict=True)):
        if ok or x is None:
            continue
        before = [y for a, y in zip(accepted[:i], logs[:i], strict=True)
                  if a and y is not None][-k:]
        if not before:
            continue
        level = sum(before) / len(before)
        out[i] = any(y is not None and abs(y - level) < abs(y - x) for y in logs[i + 1:])
    return out



def _back(current: Any, cp: Mapping[str, Any]) -> bool:
    """Whether this run's value lies nearer the level before a sustained move
    than the level after it (log scale): the figure came back, and the run is
    not called for the runs before it."""
    before, after = cp.get("before"), cp.get("after")
    if not all(isinstance(v, int | float) and v > 0 for v in (current, before, after)):
        return False
    here = math.log(current)
    return abs(here - math.log(before)) < abs(here - math.log(after))


def _sustained(judging: Any, figures: Mapping[str, Any], where: Mapping[str, Any],
               settings: Any, run_id: str, level_runs: frozenset[str],
               pending: frozenset[str], results: Mapping[str, Any], rho: Mapping[str, float],
               rejected: frozenset[str] = frozenset()) -> dict[str, dict[str, Any]]:
    """Figures of the families whose CUSUM is beyond its limit at this run, with
    the run since which they stayed beyond their old level (``since``); each
    figure's runs read through the statistic its verdict judged, its scores
    deflated by its lag-1 correlation ``rho`` (:func:`_rho`)."""
    series = {name: _medians(w[3], w[4], run_id, level_runs, pending, results.get(name),
                             figures[name].baseline_runs, settings.for_figure(name).alpha,
                             rejected, settings.for_figure(name).k)
              for name, w in where.items()}
    medians = {name: (m, where[name][5]) for name, (m, _) in series.items()}
    found = judging.sustained_families(judging.families(figures, settings), medians, settings,
                                       rho=rho)
    for name, cp in found.items():
        ids = series[name][1]
        cp["since"] = ids[max(len(ids) - int(cp["runs_after"]), 0)]
    return found, series


def _grown(ser: tuple[list[float], list[str]], fs: Any, rho: float = 0.0
           ) -> dict[str, Any] | None:
    """The run-to-run spread of the newest runs grown against the runs before
    them (``judging.changes.spread_growth``; ``ser``: every measured run since
    the last accepted level, called ones included, this run last: the runs
    before the newest :data:`SPREAD_RUNS` are the reference, so the reference
    follows a change of the spread once its runs are that old), with the run
    since which it grew, or None."""
    from hpcval.history.judging.changes import SPREAD_RUNS, spread_growth

    values, ids = ser
    newest = max(SPREAD_RUNS)
    if len(values) <= newest or any(v <= 0 for v in values):
        return None
    logs = [math.log(v) for v in values]
    found = spread_growth(logs, logs[:-newest][-max(fs.spread_runs, fs.k):], fs.alpha, rho)
    if found is not None:
        found["since"] = ids[len(ids) - found["runs"]]
    return found


def _names_spread(every: tuple[list[float], list[str]], fs: Any, rho: float
                  ) -> dict[str, Any] | None:
    """For a run already beyond its threshold: whether the runs before it (not
    the run itself: one far run is a move of the level) scatter more than the
    accepted runs, at :data:`SPREAD_NAMING_ALPHA`. Returns what
    :func:`_grown` returns, the run itself counted in ``runs``, or None."""
    values, ids = every
    if len(values) < 2:
        return None
    found = _grown((values[:-1], ids[:-1]), replace(fs, alpha=SPREAD_NAMING_ALPHA), rho)
    return None if found is None else {**found, "runs": found["runs"] + 1}


def _both_ways(values: Sequence[float], detail: Mapping[str, Any]) -> bool:
    """Whether ``values`` (the newest :data:`BOTH_WAYS_RUNS` run values, this
    run last) hold a run beyond the verdict's threshold above its level and
    one below it: a scatter that grew reaches both ways, a level that moved
    only one (and a step inside the newest 8 or 12 runs widens their
    deviations from one median as a wider scatter does)."""
    base, thr = detail.get("baseline_median"), detail.get("threshold")
    if not isinstance(base, int | float) or base <= 0 or not isinstance(thr, int | float):
        return False
    far = math.log1p(thr)
    logs = [math.log(v / base) for v in values if v > 0]
    return any(y > far for y in logs) and any(y < -far for y in logs)


def _within_accepted(runs: Sequence[Sequence[float]], current: Sequence[float]
                     ) -> dict[str, Any] | None:
    """The lowest and highest median of the accepted window's runs when this
    run's median lies between them (at least :data:`WITHIN_RUNS` runs), else
    None: a run the accepted runs have already been as far as is no outlier
    to hold out of the baselines (``run.holds.hold_reasons``)."""
    meds = [statistics.median(r) for r in runs if r]
    if len(meds) < WITHIN_RUNS or not current:
        return None
    here = statistics.median(current)
    low, high = min(meds), max(meds)
    return {"low": low, "high": high, "runs": len(meds)} if low <= here <= high else None


def _beyond(detail: Mapping[str, Any], ratio: float) -> bool:
    """Whether a ``regressed`` or ``improved`` verdict still lies beyond its
    threshold with its interval widened by the grown spread's ``ratio``."""
    if detail.get("sustained") is not None:
        return False
    ch, lo, hi = detail.get("change"), detail.get("ci_low"), detail.get("ci_high")
    thr = detail.get("threshold")
    if not all(isinstance(v, int | float) and v > -1 for v in (ch, lo, hi)) \
            or not isinstance(thr, int | float):
        return False
    centre, half = math.log1p(ch), (math.log1p(hi) - math.log1p(lo)) / 2
    return abs(centre) - ratio * half >= math.log1p(thr)




def _rho(data: Any, verdict: Any) -> float:
    """Lag-1 correlation between the accepted runs of a figure's window (the
    statistic its verdict judged, log scale), from the runs before the newest
    five (a cut in progress that entered the baseline must not read as
    correlation): ``judging.model.lag1``."""
    from hpcval.history.judging.model import lag1
    from hpcval.history.judging.modes import run_values

    runs = list(data.baseline_runs)
    starts = list(getattr(data, "level_starts", []) or [])
    if len(runs) > 5 + 10:
        runs = runs[:-5]
    statistic = getattr(verdict, "statistic", "median")
    share = getattr(verdict, "slow_share", None)
    split_at = share.get("split") if isinstance(share, dict) else None
    values = run_values(runs, getattr(verdict, "better", "higher"), statistic, split_at, runs)
    pairs = [(i, math.log(v)) for i, v in enumerate(values)
             if isinstance(v, int | float) and v > 0]
    if len(pairs) != len(values):
        return 0.0  # runs without a value of the statistic: no regular series
    return lag1([y for _, y in pairs], starts)


def _follows(data: Any, verdict: Any, every: tuple[list[float], list[str]], alpha: float,
             rho: float) -> dict[str, Any] | None:
    """Whether a run behind called (or held) runs lies within the AR(1)
    forecast from the newest of them: ``mu + rho (y_prev - mu)`` with variance
    ``s^2 (1 - rho^2)`` plus that of ``mu`` (log scale; ``mu``, ``s``: mean
    and sd of the accepted window's run values, ``s^2`` corrected for the
    AR bias, ``rho``: :func:`_rho`; t reference with the window's effective
    number of runs less one). Returns ``{"rho", "forecast", "p", "after"}``
    when the run is not worse than that forecast at ``alpha`` (one-sided),
    else None (also when ``rho`` is 0: runs independent)."""
    from scipy import stats

    from hpcval.history.judging.modes import run_values

    values, ids = every
    if len(values) < 2 or any(v <= 0 for v in values[-2:]):
        return None
    if rho <= 0:
        return None
    statistic = getattr(verdict, "statistic", "median")
    share = getattr(verdict, "slow_share", None)
    split_at = share.get("split") if isinstance(share, dict) else None
    runs = list(data.baseline_runs)
    base = [math.log(v) for v in run_values(runs, getattr(verdict, "better", "higher"),
                                            statistic, split_at, runs)
            if isinstance(v, int | float) and v > 0]
    n = len(base)
    if n < 10:
        return None
    mu = sum(base) / n
    s2 = sum((y - mu) ** 2 for y in base) / (n - 1)
    s2 /= max(1.0 - (1 + rho) / (n * (1 - rho)), 1 / 3)
    n_eff = max(n * (1 - rho) / (1 + rho), 2.0)
    prev, cur = math.log(values[-2]), math.log(values[-1])
    forecast = mu + rho * (prev - mu)
    se = math.sqrt(s2 * (1 - rho * rho) + s2 / n_eff * (1 - rho) ** 2)
    if se <= 0:
        return None
    t = (cur - forecast) / se
    worse = stats.t.cdf(t, n_eff - 1) if getattr(verdict, "better", "higher") == "higher" \
        else stats.t.sf(t, n_eff - 1)
    p = float(worse)
    if p < alpha:
        return None
    return {"rho": rho, "forecast": math.exp(forecast), "p": p, "after": ids[-2]}


def _gap(hist: list[HistoryPoint], rejected: frozenset[str]) -> int:
    """Runs measured after a figure's newest accepted run (called, held, or
    left out), up to this one: how far the level's runs lie behind it."""
    gap = 0
    for p in reversed(hist):
        if p.accepted and p.measured and p.samples:
            break
        if p.measured and p.samples and p.run_id not in rejected:
            gap += 1
    return gap
