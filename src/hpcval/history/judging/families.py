"""Families of figures that share a cause, one test per family (Stouffer's
method for correlated tests) and Holm's correction across a run's families."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hpcval.core.errors import InputError
from hpcval.history.judging.model import MEAN_SHARE, TIME_UNITS, FigureData, _Assessment, _stats
from hpcval.history.judging.settings import JudgingSettings


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
