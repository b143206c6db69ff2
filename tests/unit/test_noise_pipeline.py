"""bench/noise_shapes.py's simulation of ``hpcval validate``'s path
(``Pipeline``: ``hpcval.run.decide.decide`` on points kept in memory) against
``store_and_judge`` on a real results store, run for run; and the rules the
dependent noise shapes asked for (docs/judging.md, "Runs that depend on each
other"), each on a seeded history through the real store."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from hpcval.core.runid import new_run_id
from hpcval.history.store import Store
from hpcval.reporting.report import load_run_report
from hpcval.run.verdicts import store_and_judge
from hpcval.site import Site

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("noise_shapes",
                                                  ROOT / "bench" / "noise_shapes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _site(tmp_path: Path) -> Site:
    root = tmp_path / "checkout"
    (root / "site-configs" / "s").mkdir(parents=True)
    (root / "site-configs" / "s" / "config.py").write_text("")
    return Site("s", root)


def _stored_run(site: Site, samples: np.ndarray) -> tuple[str, object]:
    """A run report of the bench's one case (sim_check@sim:default+env) with its
    one figure ``fig`` (MB/s, higher is better)."""
    run_id = new_run_id()
    out = site.var / "output" / run_id / "case"
    out.mkdir(parents=True)
    values = [float(x) for x in samples]
    (out / "hpcval-samples.json").write_text(json.dumps(
        {"fig": {"unit": "MB/s", "better": "higher", "samples": values}}))
    tc = {"display_name": "sim_check", "system": "sim", "partition": "default",
          "environ": "env", "result": "pass", "fail_phase": None, "outputdir": str(out),
          "stagedir": None, "unique_name": "x",
          "perfvalues": {"sim:default:fig": [float(np.median(values)), 0, None, None, "MB/s",
                                             "pass"]}}
    path = site.report_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"session_info": {"hostname": "h"},
                                "runs": [{"testcases": [tc]}]}))
    return run_id, load_run_report(path)


def _sequence(rng: np.random.Generator) -> list[np.ndarray]:
    """Clean runs, one at x0.5, clean runs, one at x1.5, clean runs, a 15 % cut
    that stays: what the shapes exercise (called runs, holds, transients, the
    CUSUM, the spread test, the lag-1 correlation)."""
    def run(factor: float = 1.0) -> np.ndarray:
        return 100 * factor * np.exp(rng.normal(0, 0.05) + rng.normal(0, 0.03, 5))
    return ([run() for _ in range(18)] + [run(0.5)] + [run() for _ in range(5)] + [run(1.5)]
            + [run() for _ in range(4)] + [run(0.85) for _ in range(5)])


def test_the_simulation_decides_as_store_and_judge_run_for_run(tmp_path):
    bench = _bench()
    runs = _sequence(np.random.default_rng(42))
    site = _site(tmp_path)
    pipe = bench.Pipeline("higher")
    differ, outcomes = [], []
    for x in runs:
        run_id, report = _stored_run(site, x)
        judged = store_and_judge(site, run_id, report)
        (_, _, real, detail), = judged.verdicts
        accepted = Store(site.history_db).runs()[-1]["accepted"]
        sim, sim_detail, sim_accepted = pipe.judge(x, run_id)
        outcomes.append(real)
        if (real, bool(accepted), detail.get("change")) != (sim, sim_accepted,
                                                            sim_detail.get("change")):
            differ.append((run_id, real, accepted, sim, sim_accepted))
    assert differ == []
    # the sequence exercised what it is for: no baseline first, the x0.5 run
    # called, the x1.5 run held, the cut called
    assert outcomes[:5] == ["no-baseline"] * 5
    assert outcomes[18] == "regressed" and outcomes[24] == "improved"
    assert Store(site.history_db).holds()
    assert "regressed" in outcomes[-5:]


def test_one_bad_run_is_a_transient_the_clean_runs_after_it_are_not_regressed(tmp_path):
    """A run at x0.5, called, then clean runs: before, the CUSUM read the called
    run and flagged the clean runs after it (23 % per run, 46 % in the first
    three on seeded histories); now it leaves the series once a run comes back."""
    bench = _bench()
    called = 0
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        pipe = bench.Pipeline("higher")
        pipe.prefill([100 * np.exp(rng.normal(0, 0.05) + rng.normal(0, 0.03, 5))
                      for _ in range(30)])
        first, _, _ = pipe.judge(50 * np.exp(rng.normal(0, 0.05) + rng.normal(0, 0.03, 5)))
        assert first == "regressed"
        for _ in range(4):
            outcome, detail, _ = pipe.judge(
                100 * np.exp(rng.normal(0, 0.05) + rng.normal(0, 0.03, 5)))
            assert detail.get("sustained") is None, detail
            called += outcome == "regressed"
    assert called <= 1  # at most what the single-run verdicts call on clean runs


def test_an_extreme_improvement_is_held_until_the_old_level_comes_back(tmp_path):
    site = _site(tmp_path)
    rng = np.random.default_rng(3)
    for _ in range(12):
        store_and_judge(site, *_stored_run(site, 100 * np.exp(rng.normal(0, 0.05)
                                                              + rng.normal(0, 0.03, 5))))
    run_id, report = _stored_run(site, 150 * np.exp(rng.normal(0, 0.03, 5)))
    judged = store_and_judge(site, run_id, report)
    assert [o for _, _, o, _ in judged.verdicts] == ["improved"]
    assert not judged.regressed and f"HELD run {run_id}" in judged.text
    assert "held like a loss" in judged.text
    assert not Store(site.history_db).runs()[-1]["accepted"]
    # a clean run at the old level decides it: an outlier, never in a baseline
    store_and_judge(site, *_stored_run(site, 100 * np.exp(rng.normal(0, 0.03, 5))))
    assert Store(site.history_db).holds()[run_id]["state"] == "outlier"


def test_a_grown_run_to_run_spread_is_named_unstable_not_a_level_move(tmp_path):
    """The level holds, the runs scatter 4x wider than the 40 runs before: the
    verdict names the spread with the run since which it grew."""
    bench = _bench()
    rng = np.random.default_rng(8)
    pipe = bench.Pipeline("higher")
    pipe.prefill([100 * np.exp(rng.normal(0, 0.04) + rng.normal(0, 0.02, 5))
                  for _ in range(40)])
    got = []
    for i in range(12):
        b = 0.16 * (1 if i % 2 else -1) * (1 + 0.2 * rng.random())
        got.append(pipe.judge(100 * np.exp(b + rng.normal(0, 0.02, 5))))
    named = [d for o, d, _ in got if o == "unstable" and "run_spread" in d]
    assert named, [o for o, _, _ in got]
    spread = named[-1]["run_spread"]
    assert spread["ratio"] >= 1.5 and spread["low"] <= spread["ratio"] <= spread["high"]
    assert spread["since"].startswith("r000")
    assert "run-to-run spread x" in named[-1]["note"]


def test_lag1_and_deflate():
    from hpcval.history.judging.changes import deflate
    from hpcval.history.judging.model import RHO_MAX, lag1

    rng = np.random.default_rng(5)
    iid = [float(lag1(rng.normal(0, 1, 30))) for _ in range(200)]
    x = np.zeros(30 * 200)
    for i in range(1, x.size):
        x[i] = 0.8 * x[i - 1] + rng.normal(0, 0.6)
    ar = [lag1(x[j:j + 30]) for j in range(0, x.size, 30)]
    assert np.mean(iid) < 0.12 and min(iid) >= 0.0  # never negative: never bolder
    assert 0.65 < np.mean(ar) <= RHO_MAX  # the small-sample bias corrected
    assert lag1([1.0, 2.0, 3.0]) == 0.0  # too few runs: independent
    assert deflate(0.0) == 1.0 and abs(deflate(0.5) - (1 / 3) ** 0.5) < 1e-12
