"""A level that wanders (runs that depend on each other) through validate's
own path (``store_and_judge`` on a real results store): once a run that
wandered below the level is called, a run that follows it within the
wander's own forecast is held for a person, not `regressed` as well
(docs/judging.md, "Runs that depend on each other")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from hpcval.history.store import Store

from .test_dependent_noise import _judge, _site


def _ar_runs(seed: int, phi: float = 0.8) -> Iterator[np.ndarray]:
    """Runs of a bandwidth whose level is an AR(1) of lag-1 correlation ``phi``
    (stationary sd 5 %), 3 % within a run, 5 samples each (the noise shapes
    bench's ``ar0.8``)."""
    rng = np.random.default_rng(seed)
    b = rng.normal(0, 0.05)
    while True:
        yield 100 * np.exp(b + rng.normal(0, 0.03, 5))
        b = phi * b + rng.normal(0, 0.05 * np.sqrt(1 - phi * phi))


def test_a_run_that_follows_a_called_wander_is_held_not_regressed(tmp_path: Path):
    """Before: the run after the called one, still as far below the level as
    the wander had taken it, was `regressed` too: a run behind called runs was
    judged as unrelated to them, and where runs depend on each other it is
    not (AR(1) 0.8: 3.8 % of clean runs were false alarms of this kind)."""
    site = _site(tmp_path)
    runs = _ar_runs(17)
    for _ in range(32):
        _judge(site, next(runs))
    got = [_judge(site, next(runs)) for _ in range(2)]
    assert [o for _, o, _ in got] == ["regressed", "inconclusive"]
    called, (held, _, detail) = got[0][0], got[1]
    assert detail["follows"]["after"] == called
    assert detail["follows"]["rho"] > 0.3
    assert "sustained" not in detail
    hold = Store(site.history_db).holds()[held]
    assert hold["state"] == "held"
    assert hold["reasons"][0].startswith("bw follows the called run")
