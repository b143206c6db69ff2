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

import numpy as np
import ruptures
from scipy import stats

from hpcval.errors import InputError
from hpcval.judging.settings import FigureSettings, JudgingSettings
from hpcval.judging.verdict import MAD_TO_SD, adjust


@dataclass(frozen=True)
class ChangePoint:
    """A change between ``values[index - 1]`` and ``values[index]``."""

    #: index of the first value at the new level
    index: int
    #: medians of the segment before and after (in the figure's unit)
    before: float
    after: float
    #: relative change after / before - 1
    change: float
    #: Welch t-test of the two adjacent segments (two-sided)
    p_value: float
    #: number of values in the segments before and after
    n_before: int
    n_after: int


def _noise_sd(x: np.ndarray) -> float:
    """Robust noise level from successive differences (ignores steps)."""
    if x.size < 3:
        return float(np.std(x, ddof=1)) if x.size > 1 else 0.0
    d = np.diff(x)
    sd = MAD_TO_SD * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2)
    if sd == 0.0:
        sd = float(np.std(d, ddof=1)) / math.sqrt(2)
    return sd


def _welch_p(a: np.ndarray, b: np.ndarray) -> float:
    if np.var(a) == 0 and np.var(b) == 0:
        return 0.0 if float(np.mean(a)) != float(np.mean(b)) else 1.0
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
        before, after = float(np.median(seg_a)), float(np.median(seg_b))
        if log:
            change = math.expm1(float(np.mean(y[b:edges[i + 2]]) - np.mean(y[edges[i]:b])))
        else:
            change = (after - before) / abs(before) if before else math.inf
        out.append(ChangePoint(index=b, before=before, after=after, change=change,
                               p_value=_welch_p(y[edges[i]:b], y[b:edges[i + 2]]),
                               n_before=len(seg_a), n_after=len(seg_b)))
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
