"""Faults of ``hpcval export`` as monitoring reads it, through the real command.

- A run whose result the export did not list (``unstable``: a site whose
  judging fails runs on unstable figures) was exported with every
  ``hpcval_run_result`` state at 0: the run's result was lost to the
  monitoring. It is now its own state, as is any result or outcome a newer
  judging adds.
- A two-moded figure is judged on its fast mode: `hpcval report` prints that
  median, the export had only the median of all samples beside the baseline,
  so a dashboard's "baseline -> value" disagreed with the report's. The value
  the verdict compared is now exported (``hpcval_figure_judged_value``).
- A stored vetting that cannot be read is named on stderr and counted
  (``hpcval_vet_unreadable_files``); the rest is exported, exit 0; the store is
  untouched.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from history_maker import Change, make_history
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from .conftest import TRACEBACK, run, tree_digest


def _families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_an_unstable_run_keeps_its_result(tmp_path: Path) -> None:
    hist = make_history(tmp_path, runs=6, last=[Change("stream_check", "triad", 0.6)])
    conn = sqlite3.connect(hist.site.history_db)
    with conn:
        conn.execute("UPDATE runs SET result = 'unstable' WHERE run_id = ?",
                     (hist.run_ids[-1],))
        conn.execute("UPDATE verdicts SET outcome = 'unstable' WHERE run_id = ? AND "
                     "variable = 'triad'", (hist.run_ids[-1],))
    conn.close()
    res = run(hist.site.root, "export", "--site", "demo")
    assert res.returncode == 0 and TRACEBACK not in res.output, res.output
    fams = _families(res.stdout)
    ones = [s.labels["result"] for s in fams["hpcval_run_result"] if s.value == 1]
    assert ones == ["unstable"]
    outcome = [s.labels["outcome"] for s in fams["hpcval_figure_outcome"]
               if s.value == 1 and s.labels["figure"] == "triad"]
    assert outcome == ["unstable"]


def test_the_value_judged_is_exported_beside_the_baseline(tmp_path: Path) -> None:
    hist = make_history(tmp_path, runs=6, last=[Change("stream_check", "triad", 0.6)])
    res = run(hist.site.root, "export", "--site", "demo")
    assert res.returncode == 0, res.output
    fams = _families(res.stdout)
    judged = {s.labels["figure"]: s.value for s in fams["hpcval_figure_judged_value"]
              if s.labels["check"] == "stream_check"}
    assert judged["triad"] > 0 and set(judged) == {
        s.labels["figure"] for s in fams["hpcval_figure_baseline"]
        if s.labels["check"] == "stream_check"}


def test_an_unreadable_vetting_is_named_and_the_rest_exported(tmp_path: Path) -> None:
    hist = make_history(tmp_path, runs=2)
    broken = hist.site.var / "vet" / "20261123T210000Z-000003"
    broken.mkdir(parents=True)
    (broken / "vet.json").write_bytes(b"\x00\x01 not json")
    before = tree_digest(hist.site.var)
    res = run(hist.site.root, "export", "--site", "demo")
    assert res.returncode == 0 and TRACEBACK not in res.output, res.output
    assert f"{broken / 'vet.json'}" in res.stderr and "left out" in res.stderr
    fams = _families(res.stdout)
    assert [s.value for s in fams["hpcval_vet_unreadable_files"]] == [1]
    assert fams["hpcval_run_info"]
    assert tree_digest(hist.site.var) == before
