"""Spread from the history, families of figures and stability, on seeded synthetic
samples with known effect, spread, correlation and K (hpcval.history.judging)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hpcval.core.errors import InputError
from hpcval.history.judging import (
    FigureData,
    JudgingSettings,
    families,
    judge_figure,
    judge_run,
    pooled_spread,
    stouffer,
)


def correlated_runs(rng: np.random.Generator, runs: int, levels: list[float], spread: float,
                    rho: float, within: float = 0.01, n: int = 5) -> list[list[list[float]]]:
    """``runs`` runs of len(levels) figures whose run shifts (log sd ``spread``)
    correlate at ``rho``; returns [run][figure] -> samples."""
    m = len(levels)
    cov = spread * spread * (rho * np.ones((m, m)) + (1 - rho) * np.eye(m))
    out = []
    for _ in range(runs):
        shift = rng.multivariate_normal(np.zeros(m), cov)
        out.append([list(lv * np.exp(s + rng.normal(0, within, n)))
                    for lv, s in zip(levels, shift, strict=True)])
    return out


NAMES = ["case/bw_256KiB", "case/bw_1MiB", "case/bw_4MiB"]


def bandwidth_run(history: list[list[list[float]]], current: list[list[float]]
                  ) -> dict[str, FigureData]:
    return {name: FigureData([r[i] for r in history], current[i], "higher", "MB/s")
            for i, name in enumerate(NAMES)}


# --------------------------------------------------------------------------- spread
def test_pooled_spread_restarts_at_a_level_and_ignores_one_outlier_run() -> None:
    rng = np.random.default_rng(1)
    x = list(rng.normal(0, 0.05, 15)) + list(rng.normal(-0.5, 0.05, 15))
    sd, df, used = pooled_spread(x, [15])
    assert sd == pytest.approx(0.05, rel=0.35) and df == 28 and used == 30
    # without the level start the step counts as noise
    assert pooled_spread(x)[0] > 0.2
    y = list(rng.normal(0, 0.05, 20))
    y[7] = 2.0  # one broken run
    sd, df, used = pooled_spread(y)
    assert sd < 0.1 and used == 19 and df == 18


def test_degrees_of_freedom_come_from_the_window() -> None:
    rng = np.random.default_rng(2)
    hist = [r[0] for r in correlated_runs(rng, 30, [100.0], 0.07, 0.0)]
    cur = list(80 * np.exp(rng.normal(0, 0.01, 5)))
    five = judge_figure(hist[-5:], cur, "higher")
    thirty = judge_figure(hist, cur, "higher")
    assert five.spread_runs == 5 and thirty.spread_runs == 30
    assert five.level_runs == thirty.level_runs == 5
    # same level, more degrees of freedom: a narrower interval at the same level
    assert thirty.ci_high - thirty.ci_low < five.ci_high - five.ci_low


@pytest.mark.parametrize("window,min_rate", [(5, 0.45), (30, 0.80)])
def test_power_of_a_20_percent_drop_grows_with_the_window(window: int, min_rate: float) -> None:
    """One figure, spread 6.6 % (the lab's bw_1MiB), K = 5: a t with 4 degrees of
    freedom calls about half; 29 call most (the known-spread z-test: ~0.9)."""
    rng = np.random.default_rng(3)
    trials, hits = 300, 0
    for _ in range(trials):
        hist = [r[0] for r in correlated_runs(rng, window, [100.0], 0.066, 0.0)]
        cur = correlated_runs(rng, 1, [80.0], 0.066, 0.0)[0][0]
        hits += judge_figure(hist, cur, "higher").outcome == "regressed"
    assert hits / trials >= min_rate


def test_false_regressed_with_a_long_window_is_at_most_alpha() -> None:
    rng = np.random.default_rng(4)
    trials = 600
    from hpcval.history.judging import FigureSettings
    fs = FigureSettings(threshold=0.0)
    false = 0
    for _ in range(trials):
        runs = [r[0] for r in correlated_runs(rng, 31, [100.0], 0.07, 0.0)]
        false += judge_figure(runs[:30], runs[30], "higher", fs).outcome == "regressed"
    assert false / trials <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)


# --------------------------------------------------------------------------- families
def test_default_families_are_the_bandwidths_and_latencies_of_one_case() -> None:
    data = {"a/bw_1MiB": FigureData([], [1.0], "higher", "MB/s"),
            "a/bw_4MiB": FigureData([], [1.0], "higher", "MB/s"),
            "a/lat_8B": FigureData([], [1.0], "lower", "us"),
            "b/bw_1MiB": FigureData([], [1.0], "higher", "MB/s")}
    groups = families(data, JudgingSettings())
    assert groups == {("a", "bandwidth"): ["a/bw_1MiB", "a/bw_4MiB"],
                      ("a", "latency"): ["a/lat_8B"], ("b", "bandwidth"): ["b/bw_1MiB"]}
    site = JudgingSettings.from_mapping({"families": {"net": ["*/bw_1MiB", "a/lat_*"]}})
    groups = families(data, site)
    assert groups[("", "net")] == ["a/bw_1MiB", "a/lat_8B", "b/bw_1MiB"]


def test_stouffer_uses_the_correlation() -> None:
    z = [2.0, 2.0, 2.0]
    assert stouffer(z, np.eye(3)) == pytest.approx(2.0 * math.sqrt(3))
    assert stouffer(z, np.ones((3, 3))) == pytest.approx(2.0)
    assert stouffer(z, None) == pytest.approx(2.0)
    # a negative correlation estimated from few runs does not make it bolder
    assert stouffer(z, -0.5 * np.ones((3, 3)) + 1.5 * np.eye(3)) == pytest.approx(
        2.0 * math.sqrt(3))


@pytest.mark.parametrize("rho", [0.0, 0.95])
def test_the_family_test_keeps_false_alarms_at_alpha(rho: float) -> None:
    rng = np.random.default_rng(5)
    settings = JudgingSettings(threshold=0.0)
    trials, false = 300, 0
    for _ in range(trials):
        runs = correlated_runs(rng, 21, [100.0, 200.0, 300.0], 0.07, rho)
        verdicts = judge_run(bandwidth_run(runs[:20], runs[20]), settings)
        false += any(v.outcome == "regressed" for v in verdicts.values())
    assert false / trials <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / trials)


def test_a_family_calls_a_shared_drop_and_names_its_figures() -> None:
    """Three bandwidths correlated at 0.95 (the lab's), spread 7 %, a 20 % drop of
    all three: 2.9 prediction sds. The family test runs at alpha / 2 (half of it
    is kept for one figure moving alone) and names figures by Holm within the
    family: about 0.8 of the runs by theory."""
    rng = np.random.default_rng(6)
    trials, family_hits, named = 200, 0, 0
    for _ in range(trials):
        runs = correlated_runs(rng, 20, [100.0, 200.0, 300.0], 0.07, 0.95)
        cur = correlated_runs(rng, 1, [80.0, 160.0, 240.0], 0.07, 0.95)[0]
        verdicts = judge_run(bandwidth_run(runs, cur), JudgingSettings())
        outs = [v.outcome for v in verdicts.values()]
        family_hits += "regressed" in outs
        named += outs.count("regressed")
        assert {v.family for v in verdicts.values()} == {"bandwidth"}
    assert family_hits / trials >= 0.7
    assert named / (3 * trials) >= 0.6


def test_one_figure_far_beyond_its_threshold_is_regressed_alone() -> None:
    rng = np.random.default_rng(7)
    runs = correlated_runs(rng, 20, [100.0, 200.0, 300.0], 0.03, 0.5)
    cur = correlated_runs(rng, 1, [100.0, 200.0, 100.0], 0.03, 0.5)[0]
    verdicts = judge_run(bandwidth_run(runs, cur), JudgingSettings())
    assert verdicts["case/bw_4MiB"].outcome == "regressed"
    assert verdicts["case/bw_256KiB"].outcome != "regressed"
    v = verdicts["case/bw_4MiB"]
    # the printed interval is at the level of the decision
    assert v.ci_level is not None and v.ci_level >= 0.9
    assert v.ci_high < -0.05


# --------------------------------------------------------------------------- stability
def test_a_scattered_run_is_unstable_and_a_clean_one_is_not() -> None:
    rng = np.random.default_rng(8)
    runs = [r[0] for r in correlated_runs(rng, 20, [10.0], 0.03, 0.0, within=0.02)]
    scattered = list(10.0 * np.exp(rng.normal(0, 0.3, 5)))
    v = judge_figure(runs, scattered, "lower")
    assert v.outcome in ("unstable", "regressed")
    assert v.dispersion is not None and v.dispersion["ratio"] >= 3
    if v.outcome == "unstable":
        assert v.dispersion["p"] < 0.05
    clean = list(10.0 * np.exp(rng.normal(0, 0.02, 5)))
    assert judge_figure(runs, clean, "lower").outcome == "pass"
    # a factor of 0 judges no stability
    from hpcval.history.judging import FigureSettings
    assert judge_figure(runs, scattered, "lower",
                        FigureSettings(unstable=0.0)).dispersion is None


def test_a_big_messy_drop_is_not_hidden_by_its_scatter() -> None:
    """The 16-busy-loops run: a latency 100x longer with samples scattered over
    two decades is `regressed` or `unstable`, never `inconclusive`."""
    rng = np.random.default_rng(9)
    runs = [r[0] for r in correlated_runs(rng, 6, [1.41], 0.05, 0.0, within=0.03)]
    cur = list(150.0 * np.exp(rng.normal(0, 1.5, 5)))
    v = judge_figure(runs, cur, "lower")
    assert v.outcome in ("regressed", "unstable"), v.note


def test_unstable_false_alarms_on_clean_runs() -> None:
    rng = np.random.default_rng(10)
    trials, false = 400, 0
    for _ in range(trials):
        runs = [r[0] for r in correlated_runs(rng, 21, [10.0], 0.05, 0.0, within=0.05)]
        false += judge_figure(runs[:20], runs[20], "higher").outcome == "unstable"
    assert false / trials <= 0.02


def test_settings_for_families_and_stability(tmp_path) -> None:
    path = tmp_path / "judging.yaml"
    path.write_text("spread_runs: 20\nunstable: 4\nunstable_fails: false\n"
                    "families:\n  net: ['imb_*/bw_*']\n")
    s = JudgingSettings.load(path)
    assert (s.spread_runs, s.unstable, s.unstable_fails) == (20, 4.0, False)
    assert s.family_of("imb_x/bw_1MiB") == "net" and s.family_of("imb_x/lat_8B") is None
    for text, message in (("unstable: 0.5\n", "unstable: '0.5'"),
                          ("spread_runs: 1\n", "spread_runs: '1'"),
                          ("unstable_fails: maybe\n", "unstable_fails: 'maybe'"),
                          ("families: [a]\n", "families:"),
                          ("families:\n  net: bw\n", "families: net")):
        path.write_text(text)
        with pytest.raises(InputError, match=message) as err:
            JudgingSettings.load(path)
        assert str(path) in str(err.value)
