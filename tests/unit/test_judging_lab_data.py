"""hpcval.history.judging on samples recorded on the lab by bench/detection.sh (IMB
PingPong between two lab nodes; clean runs and runs on links 3-20 % slower).

The file is real data, so these tests check what the model claims about it:
the noise has a between-run level a pooled-sample test mistakes for change,
clean runs are not `regressed`, a 20 % slower link is.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from hpcval.history.judging import FigureData, JudgingSettings, judge_run, sustained_change

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "judging"
#: the recording (lab-pingpong.json) and its completion (lab-pingpong-2.json: a
#: second session of the runs --minutes cut short)
DATA = DATA_DIR / "lab-pingpong.json"
BANDWIDTH = ["bw_256KiB", "bw_1MiB", "bw_4MiB"]


@pytest.fixture(scope="module")
def lab() -> dict:
    if not DATA.exists():
        pytest.skip(f"{DATA} not recorded (sudo bench/detection.sh records it)")
    data = json.loads(DATA.read_text())
    for more in sorted(DATA_DIR.glob("lab-pingpong-*.json")):
        extra = json.loads(more.read_text())
        assert extra["figures"] == data["figures"], more
        assert extra["base_rate_mbit"] == data["base_rate_mbit"], more
        data["runs"] += extra["runs"]
    data["runs"].sort(key=lambda r: r["started"])
    return data


def runs_at(lab: dict, drop: int) -> list[dict]:
    return [r for r in lab["runs"] if r["drop_pct"] == drop]


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def test_recorded_runs_cover_the_experiment(lab: dict) -> None:
    assert len(runs_at(lab, 0)) >= 20
    for drop in (3, 5, 10, 20):
        assert len(runs_at(lab, drop)) >= 10, drop
    for run in lab["runs"]:
        for name, samples in run["figures"].items():
            assert len(samples) >= 5, (run["index"], name)
            assert all(x > 0 for x in samples)


def test_the_link_limits_bandwidth_at_the_chosen_rate(lab: dict) -> None:
    """Without competing traffic, 1 MiB PingPong runs at the link rate, and a 20 %
    slower link gives 20 % less (the CPU is not the limit)."""
    by_rate = {c["rate_mbit"]: median(c["figures"]["bw_1MiB"]) for c in lab["calibration"]}
    base = lab["base_rate_mbit"]
    assert by_rate[base] == pytest.approx(base / 8, rel=0.05)  # MB/s = Mbit/s / 8
    assert by_rate[base * 0.8] / by_rate[base] == pytest.approx(0.8, abs=0.03)


def test_degraded_links_move_bandwidth_by_about_the_drop(lab: dict) -> None:
    clean = {n: median([median(r["figures"][n]) for r in runs_at(lab, 0)]) for n in BANDWIDTH}
    for drop in (10, 20):
        for name in BANDWIDTH:
            level = median([median(r["figures"][name]) for r in runs_at(lab, drop)])
            assert level / clean[name] - 1 == pytest.approx(-drop / 100, abs=0.06), (drop, name)


def test_clean_runs_are_noisier_between_runs_than_within(lab: dict) -> None:
    """The run-to-run spread of large-message bandwidth is about the 7.6 % the lab
    showed at 1 Gbit/s, and it is mostly between runs: pooling samples would call
    clean runs different. (bw_256KiB is noisier within runs than between.)"""
    clean = runs_at(lab, 0)
    for name in ("bw_1MiB", "bw_4MiB"):
        medians = np.array([median(r["figures"][name]) for r in clean])
        assert medians.std(ddof=1) / medians.mean() >= 0.065
        logs = [np.log(r["figures"][name]) for r in clean]
        # sd of a 5-sample median from within-run noise alone vs sd of the run medians
        within = np.mean([x.std(ddof=1) * np.sqrt(np.pi / 2 / x.size) for x in logs])
        between = np.log(medians).std(ddof=1)
        assert between > 2 * within
        pairs = [(a, b) for i, a in enumerate(logs) for b in logs[i + 1:]]
        naive = sum(stats.ttest_ind(a, b, equal_var=False).pvalue < 0.05 for a, b in pairs)
        assert naive / len(pairs) > 0.5


def test_no_clean_run_is_regressed(lab: dict) -> None:
    clean = runs_at(lab, 0)
    settings = JudgingSettings()
    for i in range(settings.k, len(clean)):
        figures = {name: FigureData([r["figures"][name] for r in clean[i - settings.k:i]],
                                    clean[i]["figures"][name], meta["better"])
                   for name, meta in lab["figures"].items()}
        verdicts = judge_run(figures, settings)
        assert not [k for k, v in verdicts.items() if v.outcome == "regressed"], i


def test_a_sustained_20_percent_drop_is_flagged(lab: dict) -> None:
    clean = runs_at(lab, 0)
    slow = runs_at(lab, 20)
    for name in BANDWIDTH:
        history = [median(r["figures"][name]) for r in clean[-12:]]
        after = [median(r["figures"][name]) for r in slow[:4]]
        flagged = sustained_change(history + after, "higher", name=name)
        assert flagged is not None, name
        # at the first slow run, or the next when the first happened to be fast
        assert len(history) <= flagged.index <= len(history) + 1
        assert flagged.change < -0.10


def _window_verdicts(lab: dict, baseline: list[dict], run: dict) -> dict:
    figures = {name: FigureData([r["figures"][name] for r in baseline], run["figures"][name],
                                meta["better"], meta["unit"])
               for name, meta in lab["figures"].items()}
    return judge_run(figures, JudgingSettings())


def test_with_the_spread_from_all_earlier_runs_clean_runs_stay_clean(lab: dict) -> None:
    """Each clean run from the sixth on, against every clean run before it (the
    spread's window) and the last 5 (the level): no `regressed`, no `unstable`."""
    clean = runs_at(lab, 0)
    for i in range(5, len(clean)):
        verdicts = _window_verdicts(lab, clean[:i], clean[i])
        bad = {k: v.outcome for k, v in verdicts.items() if v.outcome in ("regressed",
                                                                            "unstable")}
        assert not bad, (i, bad)
        assert {v.family for v in verdicts.values()} == {"bandwidth", "latency"}


def test_a_20_percent_slower_link_is_called_by_the_bandwidth_family(lab: dict) -> None:
    """Each -20 % run against a history of the 19 clean runs (the spread's window:
    the other clean runs, those recorded before it last, as bench/detection_eval.py
    replays them; the level from the last 5): bw_1MiB and bw_4MiB `regressed` in
    most runs (7/10 and 6/10 measured; the same procedure knowing the spread:
    8/10 and 8/10, docs/judging.md), latency never."""
    clean = runs_at(lab, 0)
    called = {"bw_1MiB": 0, "bw_4MiB": 0}
    for run in runs_at(lab, 20):
        earlier = [r for r in clean if r["started"] < run["started"]]
        later = [r for r in clean if r["started"] > run["started"]]
        history = (later + earlier)[-19:]
        verdicts = _window_verdicts(lab, history, run)
        for name in called:
            called[name] += verdicts[name].outcome == "regressed"
        assert verdicts["lat_8B"].outcome != "regressed"
        v = verdicts["bw_1MiB"]
        assert v.spread_runs == 19 and v.level_runs == 5
    assert called["bw_1MiB"] >= 6 and called["bw_4MiB"] >= 5, called
