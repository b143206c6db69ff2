"""``hpcval export`` for monitoring: the judged value beside the figure, outcomes
and results it does not list, and vettings and gates: the last vetting of a partition,
each node's last ``hpcval vet --gate`` and ``hpcval health``, as gauges read
back by prometheus_client's OpenMetrics parser (what Prometheus and a
Pushgateway accept) and its Prometheus text parser (node_exporter's textfile
collector). The vettings are the lab's recorded runs (tests/data/vet) judged by
the vetting's own code and written by its own writer (``vet.report.write``);
the health results by ``hpcval.vet.health.store``."""

from __future__ import annotations

import json
import sqlite3
import types
from pathlib import Path
from typing import Any

import pytest
from history_maker import Change, make_history
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as prometheus_text

from hpcval.cli import main
from hpcval.history.store import Store
from hpcval.reporting.export import openmetrics, states
from hpcval.vet import report
from hpcval.vet.health import judge_health
from hpcval.vet.health import store as store_health
from hpcval.vet.judge import JudgeSettings
from hpcval.vet.metrics import collect
from hpcval.vet.run import judge_recorded

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "vet"


def _vetting(var: Path, name: str, vet_id: str, **extra: Any) -> dict[str, Any]:
    """The recorded lab run ``name`` stored as `hpcval vet` stores it."""
    data = json.loads((DATA / f"{name}.json").read_text())
    verdict = judge_recorded(data).to_dict()
    result = {"id": vet_id, "site": "lab", "partition": "lab", "environ": "impi",
              "started": f"{vet_id[:4]}-{vet_id[4:6]}-{vet_id[6:8]}T{vet_id[9:11]}:"
                         f"{vet_id[11:13]}:{vet_id[13:15]}Z",
              "rounds": 5, "follow_up_rounds": 0, "jobs": 1, "steps": 8, "wall_seconds": 60.0,
              "node_samples": data["node_samples"], "audit": data.get("audit", {}),
              "pair_samples": data["pair_samples"], "unmeasured": [], "skipped": {},
              "verdict": verdict, **extra}
    directory = var / "vet" / vet_id
    directory.mkdir(parents=True)
    report.write(result, directory)
    return result


def _export(var: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
            *args: str) -> tuple[int, str, str]:
    monkeypatch.setenv("HPCVAL_VAR", str(var.parent))
    code = main(["export", "--site", "lab", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def _one(samples: list, **labels: str) -> float:
    found = [s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (labels, samples)
    return found[0]


def test_a_named_node_is_its_own_series_with_its_finding(tmp_path, monkeypatch, capsys):
    var = tmp_path / "var" / "lab"
    _vetting(var, "all-healthy", "20261123T100000Z-000001")
    last = _vetting(var, "one-bad-node", "20261123T200000Z-000002")
    code, text, err = _export(var, monkeypatch, capsys)
    assert code == 0 and not err, err
    fams = _families(text)
    # the last vetting of the partition, its id only in the info gauge
    assert [s.labels["vet"] for s in fams["hpcval_vet_info"]] == ["20261123T200000Z-000002"]
    assert not [s for name, ss in fams.items() if name != "hpcval_vet_info" for s in ss
                if "20261123T200000Z-000002" in s.labels.values()]
    assert _one(fams["hpcval_vet_start_time_seconds"]) == 1795464000.0
    verdicts = {s.labels["node"]: s.labels["verdict"]
                for s in fams["hpcval_vet_node_verdict"] if s.value == 1}
    named = last["verdict"]["named_nodes"]
    assert named == ["lab-n3"]
    assert verdicts == {n: "named" if n in named else "ok" for n in last["verdict"]["nodes"]}
    assert len(fams["hpcval_vet_node_verdict"]) == 4 * 6  # one gauge per state and node
    assert _one(fams["hpcval_vet_named"], kind="node") == 1
    assert _one(fams["hpcval_vet_nodes"], verdict="named") == 1
    assert _one(fams["hpcval_vet_nodes"], verdict="ok") == 5
    assert _one(fams["hpcval_vet_complete"]) == 1 and _one(fams["hpcval_vet_judged"]) == 1
    finding = [s.labels for s in fams["hpcval_vet_finding"]]
    assert {(f["kind"], f["name"], f["code"]) for f in finding} == \
        {("node", "lab-n3", "node/pingpong_bw_1MiB")}
    # figures are the judged ones, to the digit
    table = last["verdict"]["table"]
    for s in fams["hpcval_vet_node_figure"]:
        assert s.value == pytest.approx(table[s.labels["node"]][s.labels["figure"]]["value"])
    assert _one(fams["hpcval_vet_node_figure_off"], node="lab-n3",
                figure="pingpong_bw_1MiB") == 1
    assert _one(fams["hpcval_vet_node_figure"], node="lab-n3", figure="triad_bw",
                unit="MB/s") > 0
    pairs = last["verdict"]["pairs"]
    assert len(fams["hpcval_vet_link_figure"]) == len(pairs) == 15
    assert _one(fams["hpcval_vet_link_figure"], link="lab-n3<->lab-n4") == \
        pytest.approx(pairs["lab-n3|lab-n4"]["value"])
    # node_exporter's textfile collector reads the same text
    old = {f.name: f for f in prometheus_text(text)}
    assert len(old["hpcval_vet_node_figure"].samples) == len(fams["hpcval_vet_node_figure"])


def test_a_named_link_and_an_incomplete_vetting(tmp_path, monkeypatch, capsys):
    var = tmp_path / "var" / "lab"
    _vetting(var, "one-bad-link", "20261124T100000Z-000001",
             unmeasured=[{"kind": "node", "name": "lab-n6", "cause": "probe printed nothing"},
                         {"kind": "pair", "name": "lab-n1<->lab-n2", "cause": "no samples"}],
             skipped={"lab-n7": "DOWN"})
    code, text, _ = _export(var, monkeypatch, capsys)
    assert code == 0
    fams = _families(text)
    assert _one(fams["hpcval_vet_complete"]) == 0
    codes = {(s.labels["kind"], s.labels["code"]) for s in fams["hpcval_vet_finding"]}
    assert ("link", "link/pingpong_bw_1MiB") in codes
    assert {(s.labels["name"], s.labels["code"]) for s in fams["hpcval_vet_unmeasured"]} == \
        {("lab-n6", "unmeasured/node"), ("lab-n1<->lab-n2", "unmeasured/pair")}
    verdict = {s.labels["node"]: s.labels["verdict"] for s in fams["hpcval_vet_node_verdict"]
               if s.value == 1}
    assert verdict["lab-n6"] == "unmeasured" and verdict["lab-n7"] == "skipped"
    assert _one(fams["hpcval_vet_link_off"], link="lab-n2<->lab-n5") == 1


def test_gates_and_health_checks_per_node(tmp_path, monkeypatch, capsys):
    var = tmp_path / "var" / "lab"
    full = [_vetting(var, name, f"2026112{i}T000000Z-00000{i}")
            for i, name in enumerate(("all-healthy", "one-bad-node", "one-bad-link",
                                      "slow-30pct"))]
    # the gate of lab-n3: named again, drained (a vet.json with `gate`)
    _vetting(var, "one-bad-node", "20261125T000000Z-00000a", gate="lab-n3",
             gate_passed=False, drained=["lab-n3"])
    # hpcval health on lab-n1 (a clock 20 % low: named) and on lab-n2 (as it was)
    site = types.SimpleNamespace(var=var, name="lab", slurm_partition="lab")
    recorded = json.loads((DATA / "all-healthy.json").read_text())["node_samples"]
    for node, factor, run_id in (("lab-n1", 0.8, "20261126T000000Z-0000b1"),
                                 ("lab-n2", 1.0, "20261126T000000Z-0000b2")):
        figures = {f: [factor * x if f == "cpu_mhz" else x for x in s[node]]
                   for f, s in recorded.items()}
        verdict = judge_health(node, figures, [], full, JudgeSettings())
        store_health(site, run_id, verdict, 20.0, figures)  # type: ignore[arg-type]
    code, text, _ = _export(var, monkeypatch, capsys)
    assert code == 0
    fams = _families(text)
    # the gate is not the partition's last vetting
    assert [s.labels["vet"] for s in fams["hpcval_vet_info"]] == ["20261123T000000Z-000003"]
    assert _one(fams["hpcval_gate_passed"], node="lab-n3") == 0
    assert _one(fams["hpcval_health_passed"], node="lab-n1") == 0
    assert _one(fams["hpcval_health_passed"], node="lab-n2") == 1
    assert _one(fams["hpcval_health_figure_off"], node="lab-n1", figure="cpu_mhz",
                against="partition") == 1
    assert _one(fams["hpcval_health_time_seconds"], node="lab-n2") == 1795651200.0


def test_a_vetting_without_runs_and_an_unreadable_file(tmp_path, monkeypatch, capsys):
    """No validation run stored: the vetting alone is exported. A broken
    vet.json is named on stderr and counted, the rest still exported."""
    var = tmp_path / "var" / "lab"
    _vetting(var, "one-bad-node", "20261123T200000Z-000002")
    (var / "vet" / "20261123T210000Z-000003").mkdir()
    (var / "vet" / "20261123T210000Z-000003" / "vet.json").write_text('{"id": ')
    code, text, err = _export(var, monkeypatch, capsys)
    assert code == 0
    assert "20261123T210000Z-000003/vet.json" in err and "left out" in err
    fams = _families(text)
    assert "hpcval_run_info" not in fams
    assert _one(fams["hpcval_vet_unreadable_files"]) == 1
    assert [s.labels["vet"] for s in fams["hpcval_vet_info"]] == ["20261123T200000Z-000002"]


def test_nothing_stored_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    """A site that never ran nor vetted: wrong input (exit 2), as for report."""
    code, out, err = _export(tmp_path / "var" / "lab", monkeypatch, capsys)
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and "no results store yet" in err


def test_outcomes_and_results_the_export_does_not_know_are_states(tmp_path):
    """A newer judging's outcome or run result becomes one more state with its
    own name, never an error and never dropped."""
    hist = make_history(tmp_path, runs=6, last=[Change("stream_check", "triad", 0.6)])
    last = hist.run_ids[-1]
    conn = sqlite3.connect(hist.site.history_db)
    with conn:
        conn.execute("UPDATE runs SET result = 'drifting' WHERE run_id = ?", (last,))
        conn.execute("UPDATE verdicts SET outcome = 'drifting' WHERE run_id = ? AND "
                     "variable = 'triad'", (last,))
    conn.close()
    fams = _families(openmetrics(Store(hist.site.history_db)))
    result = {s.labels["result"]: s.value for s in fams["hpcval_run_result"]}
    assert result["drifting"] == 1 and sum(result.values()) == 1 and "unstable" in result
    ones = {(s.labels["check"], s.labels["figure"]): s.labels["outcome"]
            for s in fams["hpcval_figure_outcome"] if s.value == 1}
    assert ones[("stream_check", "triad")] == "drifting"
    assert _one(fams["hpcval_run_figures"], outcome="drifting") == 1
    assert states("pass", ("pass", "fail")) == ("pass", "fail")
    assert states("new", ("pass",)) == ("pass", "new")


def test_collect_on_an_empty_store_finds_nothing(tmp_path):
    got = collect(tmp_path / "var" / "lab", "lab")
    assert not got.found and not got.skipped
    assert got.families.lines() == [
        "# TYPE hpcval_vet_unreadable_files gauge",
        "# HELP hpcval_vet_unreadable_files Stored vetting and health results that could not "
        "be read", 'hpcval_vet_unreadable_files{site="lab"} 0.0']


def test_the_judged_value_is_the_verdicts(tmp_path):
    """``hpcval_figure_judged_value`` is the value the verdict compared with its
    baseline (``current_median``; a two-moded figure's fast mode, which the
    report prints), beside ``hpcval_figure_value``, the median of all samples."""
    hist = make_history(tmp_path, runs=6, last=[Change("stream_check", "triad", 0.6)])
    store = Store(hist.site.history_db)
    last = hist.run_ids[-1]
    fams = _families(openmetrics(store))
    judged = {(s.labels["check"], s.labels["figure"]): s.value
              for s in fams["hpcval_figure_judged_value"]}
    rows = {r["case_key"]: r["check_name"] for r in store.run_figures(last)}
    details = {(rows[case], var): d for (case, var), (_, d) in store.verdicts(last).items()}
    assert judged and set(judged) == set(details)
    for key, value in judged.items():
        assert value == details[key]["current_median"]
