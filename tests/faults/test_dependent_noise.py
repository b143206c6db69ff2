"""Verdicts on noise whose runs are not independent, through validate's own
path (``store_and_judge`` on a real results store): one bad night does not
make the clean nights after it `regressed`, an extreme improvement is held
like an extreme loss, a grown run-to-run spread is named as such
(docs/judging.md, "Runs that depend on each other")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hpcval.core.runid import new_run_id
from hpcval.history.store import Store
from hpcval.reporting.report import load_run_report
from hpcval.run.verdicts import store_and_judge
from hpcval.site import Site


def _site(tmp_path: Path) -> Site:
    root = tmp_path / "checkout"
    (root / "site-configs" / "s").mkdir(parents=True)
    (root / "site-configs" / "s" / "config.py").write_text("")
    return Site("s", root)


def _judge(site: Site, samples: np.ndarray) -> tuple[str, str, dict]:
    """Store one run of one bandwidth figure and judge it: (run id, outcome, detail)."""
    run_id = new_run_id()
    out = site.var / "output" / run_id / "case"
    out.mkdir(parents=True)
    values = [float(x) for x in samples]
    (out / "hpcval-samples.json").write_text(json.dumps(
        {"bw": {"unit": "MB/s", "better": "higher", "samples": values}}))
    tc = {"display_name": "net_check", "system": "s", "partition": "p", "environ": "e",
          "result": "pass", "fail_phase": None, "outputdir": str(out), "stagedir": None,
          "unique_name": "x",
          "perfvalues": {"s:p:bw": [float(np.median(values)), 0, None, None, "MB/s", "pass"]}}
    path = site.report_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"session_info": {"hostname": "h"},
                                "runs": [{"testcases": [tc]}]}))
    judged = store_and_judge(site, run_id, load_run_report(path))
    (_, _, outcome, detail), = judged.verdicts
    return run_id, outcome, detail


def _run(rng: np.random.Generator, factor: float = 1.0, between: float = 0.05) -> np.ndarray:
    return 100 * factor * np.exp(rng.normal(0, between) + rng.normal(0, 0.03, 5))


def test_clean_runs_after_one_bad_night_are_not_sustained_regressions(tmp_path):
    """Before: the run at x0.5, called and kept out of the baselines, stayed in
    the series the CUSUM reads, and the clean runs after it were `regressed`
    "sustained since" it (46 % of the first three on seeded histories)."""
    flagged = []
    for seed in range(4):
        site = _site(tmp_path / str(seed))
        rng = np.random.default_rng(200 + seed)
        for _ in range(20):
            _judge(site, _run(rng))
        _, outcome, _ = _judge(site, _run(rng, 0.5))
        assert outcome == "regressed"
        for _ in range(4):
            run_id, outcome, detail = _judge(site, _run(rng))
            if detail.get("sustained"):
                flagged.append((seed, run_id, outcome, detail["sustained"].get("since")))
    assert flagged == []


def test_an_extreme_improvement_is_held_not_taken_into_the_baseline(tmp_path):
    """Before: a run 1.5x faster was `improved` and accepted, and lifted the next
    five runs' level by about 8 %."""
    site = _site(tmp_path)
    rng = np.random.default_rng(9)
    for _ in range(15):
        _judge(site, _run(rng))
    run_id, outcome, _ = _judge(site, _run(rng, 1.5))
    assert outcome == "improved"
    runs = Store(site.history_db).runs()
    assert runs[-1]["run_id"] == run_id and not runs[-1]["accepted"]
    assert Store(site.history_db).holds()[run_id]["state"] == "held"


def test_a_grown_run_to_run_spread_is_named_not_regressed_or_improved(tmp_path):
    """Before: runs whose level held but which scattered twice as wide were
    `regressed` or `improved` (23 % + 27 %), and nothing said the spread grew."""
    site = _site(tmp_path)
    rng = np.random.default_rng(4)
    for _ in range(30):
        _judge(site, _run(rng, between=0.04))
    got = []
    for i in range(12):
        b = 0.16 * (1 if i % 2 else -1) * (1 + 0.2 * rng.random())
        got.append(_judge(site, 100 * np.exp(b + rng.normal(0, 0.02, 5))))
    named = [d for _, o, d in got if o == "unstable" and d.get("run_spread")]
    assert len(named) >= 3, [o for _, o, _ in got]
    assert [o for _, o, _ in got[-4:]] == ["unstable"] * 4
