"""Change points in run medians and the sustained-drop rule, on seeded series."""

from __future__ import annotations

import numpy as np
import pytest

from hpcval.core.errors import InputError
from hpcval.history.judging import FigureSettings, change_points, sustained_change, sustained_run


def series(rng: np.random.Generator, levels: list[tuple[float, int]], sd: float) -> list[float]:
    return [lvl * float(np.exp(rng.normal(0, sd))) for lvl, n in levels for _ in range(n)]


def test_a_step_is_found_with_its_size_and_significance() -> None:
    rng = np.random.default_rng(1)
    x = series(rng, [(100, 20), (85, 8)], 0.03)
    points = change_points(x)
    assert [p.index for p in points] == [20]
    p = points[0]
    assert p.change == pytest.approx(-0.15, abs=0.03)
    assert p.before == pytest.approx(100, rel=0.03) and p.after == pytest.approx(85, rel=0.03)
    assert p.p_value < 1e-4
    assert (p.n_before, p.n_after) == (20, 8)


def test_two_steps() -> None:
    rng = np.random.default_rng(2)
    x = series(rng, [(100, 15), (80, 10), (100, 10)], 0.02)
    assert [p.index for p in change_points(x)] == [15, 25]


def test_noise_alone_rarely_gives_a_change_point() -> None:
    rng = np.random.default_rng(3)
    found = sum(bool(change_points(series(rng, [(100, 25)], 0.076))) for _ in range(200))
    assert found / 200 <= 0.08


def test_change_points_are_stable_when_runs_are_appended() -> None:
    rng = np.random.default_rng(4)
    moved = 0
    trials = 50
    for _ in range(trials):
        x = series(rng, [(100, 20), (80, 6)], 0.04)
        first = [p.index for p in change_points(x)]
        more = x + series(rng, [(80, 10)], 0.04)
        second = [p.index for p in change_points(more)]
        moved += first != second[: len(first)]
    assert moved / trials <= 0.1
    # the same points give the same answer
    assert change_points(x) == change_points(list(x))


def test_linear_scale_and_input_errors() -> None:
    x = [0.0, 0.1, -0.1, 0.05, 0.0, 0.02, 5.0, 5.1, 4.9, 5.05]
    assert [p.index for p in change_points(x)] == [6]
    with pytest.raises(InputError, match="finite"):
        change_points([1.0, float("inf")])
    with pytest.raises(InputError, match="positive"):
        change_points(x, log=True)
    assert change_points([1.0, 2.0, 3.0]) == []


def test_sustained_drop_is_flagged_after_a_few_runs_but_not_after_one() -> None:
    rng = np.random.default_rng(5)
    history = series(rng, [(100, 12)], 0.03)
    drop = series(rng, [(88, 4)], 0.03)
    assert sustained_change(history + drop[:1], "higher") is None  # one low run: an outlier
    flagged = sustained_change(history + drop, "higher", name="c/bw")
    assert flagged is not None and flagged.index == 12
    assert flagged.change < -0.05


def test_sustained_rule_ignores_improvements_small_changes_and_short_history() -> None:
    rng = np.random.default_rng(6)
    history = series(rng, [(100, 12)], 0.01)
    assert sustained_change(history + series(rng, [(120, 4)], 0.01), "higher") is None
    assert sustained_change(history + series(rng, [(120, 4)], 0.01), "lower") is not None
    assert sustained_change(history + series(rng, [(97, 6)], 0.005), "higher") is None
    assert sustained_change(history + series(rng, [(97, 6)], 0.005), "higher",
                            FigureSettings(threshold=0.02)) is not None
    short = series(rng, [(100, 3), (80, 4)], 0.01)
    assert sustained_change(short, "higher") is None  # 3 runs before: below k = 5


def test_sustained_rule_false_alarms_on_noise() -> None:
    rng = np.random.default_rng(7)
    flagged = sum(sustained_change(series(rng, [(100, 18)], 0.076), "higher") is not None
                  for _ in range(200))
    assert flagged / 200 <= 0.05


def test_sustained_run_corrects_across_figures() -> None:
    rng = np.random.default_rng(8)
    histories = {f"c/noise{i}": (series(rng, [(100, 16)], 0.076), "higher") for i in range(20)}
    histories["c/slow"] = (series(rng, [(100, 12), (80, 4)], 0.03), "higher")
    flagged = sustained_run(histories)
    assert list(flagged) == ["c/slow"]
    assert flagged["c/slow"].index == 12
    # false flags over many runs of 10 unchanged figures stay rare
    false = sum(bool(sustained_run({f"c/f{i}": (series(rng, [(100, 18)], 0.076), "higher")
                                    for i in range(10)})) for _ in range(60))
    assert false / 60 <= 0.1
