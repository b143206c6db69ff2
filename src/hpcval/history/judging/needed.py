"""What a figure would need to resolve its threshold: runs at the new level,
a longer baseline or more samples per run (the ``needed`` of an inconclusive
verdict)."""

from __future__ import annotations

import functools
import math

import numpy as np

from hpcval.history.judging.model import Needed, _Assessment, _stats, _threshold_on_scale


@functools.lru_cache(maxsize=1024)
def _t_quantile(q: float, df: int) -> float:
    return float(_stats().t.ppf(q, df))


@functools.lru_cache(maxsize=64)
def _runs_table(alpha: float, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = np.arange(1, 201)
    kk = np.maximum(k, m)
    return m, kk, _stats().t.ppf(1 - alpha, kk - 1)


@functools.lru_cache(maxsize=64)
def _baseline_table(alpha: float, df: int) -> tuple[np.ndarray, np.ndarray]:
    kb = np.arange(2, 1001)
    return kb, np.full(kb.shape, _stats().t.ppf(1 - alpha, df))


def _needed(a: _Assessment) -> Needed:
    thr = _threshold_on_scale(a)
    alpha = a.settings.alpha
    k = a.baseline_runs
    run_var = a.between_var + a.within_var_current  # variance of one run's median
    t_k = _t_quantile(1 - alpha, a.df)
    resolvable = t_k * math.sqrt(run_var * (1 + 1 / k))
    smallest = (-math.expm1(-resolvable) if a.better == "higher" else math.expm1(resolvable)) \
        if a.scale == "log" else resolvable / (abs(a.base_level) or 1.0)
    if thr <= 0:
        return Needed(None, None, None, smallest)
    # m new runs against a baseline of at least as many (the sustained-change rule)
    m, kk, t_m = _runs_table(alpha, k)
    ok = t_m * np.sqrt(run_var * (1 / m + 1 / kk)) <= thr
    runs = int(m[ok][0]) if ok.any() else None
    # one run against a longer level (the spread's degrees of freedom kept)
    kb, t_b = _baseline_table(alpha, a.df)
    ok = t_b * np.sqrt(run_var * (1 + 1 / kb)) <= thr
    baseline = int(kb[ok][0]) if ok.any() else None
    if baseline is not None:
        baseline = max(baseline, k)
    samples = None
    n = max(a.samples, 1)
    budget = (thr / t_k) ** 2 / (1 + 1 / k) - a.between_var
    if budget > 0:
        per_sample = a.within_var_current * n  # variance of the median times n
        samples = max(int(math.ceil(per_sample / budget)), 1) if per_sample > 0 else 1
    return Needed(runs, baseline, samples, smallest)


def _pct(thr: float) -> str:
    return f"{thr:.0%}" if thr * 100 == round(thr * 100) else f"{thr:.1%}"


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
