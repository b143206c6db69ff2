"""``hpcval export``: a stored run in the OpenMetrics text format, read back by
prometheus_client's OpenMetrics parser (what Prometheus and a Pushgateway
accept) and by its Prometheus text parser (what node_exporter's textfile
collector uses)."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest
from history_maker import Case, Change, Fig, make_history
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as prometheus_text

from hpcval.cli import main
from hpcval.history.store import Store
from hpcval.reporting.export import FIGURE_LABELS, openmetrics


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    return make_history(tmp_path_factory.mktemp("export"), runs=7, last=[
        Change("stream_check", "triad", 0.6),
        Change("ior_check", fail_phase="sanity", reason="sanity error: IOR wrote nothing")])


def _families(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_latest_run_parses_with_every_figure_labelled(history):
    store = Store(history.site.history_db)
    text = openmetrics(store)
    assert text.endswith("# EOF\n")
    fams = _families(text)
    values = fams["hpcval_figure_value"]
    rows = [r for r in store.run_figures(history.run_ids[-1]) if r["variable"]]
    assert len(values) == len(rows) and rows
    for sample in values:
        assert set(FIGURE_LABELS) <= set(sample.labels)
        assert sample.labels["site"] == "demo"
    by_name = {(s.labels["check"], s.labels["figure"]): s for s in values}
    for r in rows:
        assert by_name[(r["check_name"], r["variable"])].value == pytest.approx(r["value"])
    pingpong = by_name[("imb_pingpong_check", "bw_1MiB")].labels
    assert (pingpong["parameters"], pingpong["unit"], pingpong["environ"]) == \
        ("cache=warm", "MB/s", "impi")
    # the run's id and provenance in one info gauge, not on every series
    info = fams["hpcval_run_info"]
    assert [s.labels["run"] for s in info] == [history.run_ids[-1]]
    assert "run" not in pingpong


def test_outcomes_are_one_gauge_per_state(history):
    fams = _families(openmetrics(Store(history.site.history_db)))
    ones = {(s.labels["check"], s.labels["figure"]): s.labels["outcome"]
            for s in fams["hpcval_figure_outcome"] if s.value == 1}
    assert ones[("stream_check", "triad")] == "regressed"
    assert ones[("imb_pingpong_check", "bw_1MiB")] == "pass"
    per_figure = {}
    for s in fams["hpcval_figure_outcome"]:
        key = (s.labels["check"], s.labels["figure"])
        per_figure[key] = per_figure.get(key, 0) + s.value
    assert set(per_figure.values()) == {1}
    result = {s.labels["result"]: s.value for s in fams["hpcval_run_result"]}
    assert result["regressed"] == 1 and sum(result.values()) == 1
    stacks = {s.labels["check"]: s.labels["mpi_stack"] for s in fams["hpcval_case_info"]}
    assert stacks["ior_check"] == "intel-mpi@2021.13"
    passed = {s.labels["check"]: s.value for s in fams["hpcval_case_passed"]}
    assert passed["ior_check"] == 0 and passed["hpcg_check"] == 1
    band = {(s.labels["check"], s.labels["figure"]): s.value
            for s in fams["hpcval_figure_band_passed"]}
    assert band[("stream_check", "triad")] == 0 and band[("stream_check", "copy")] == 1
    bounds = {(s.labels["check"], s.labels["figure"]): s.value
              for s in fams["hpcval_figure_lower_bound"]}
    assert bounds[("stream_check", "triad")] == pytest.approx(45000 * 0.95)


def test_an_earlier_run_and_the_prometheus_text_parser(history):
    text = openmetrics(Store(history.site.history_db), history.run_ids[0])
    fams = _families(text)
    assert [s.labels["run"] for s in fams["hpcval_run_info"]] == [history.run_ids[0]]
    # first run: nothing to judge against
    assert {s.labels["outcome"] for s in fams["hpcval_figure_outcome"] if s.value == 1} == \
        {"no-baseline"}
    old = {f.name: f for f in prometheus_text(text)}
    assert old["hpcval_figure_value"].type == "gauge"
    assert len(old["hpcval_figure_value"].samples) == len(fams["hpcval_figure_value"])


def test_label_values_are_escaped(tmp_path):
    odd = [Case('imb_pingpong_check', {"note": 'a"quoted"\\value'},
                [Fig("bw_1MiB", "MB/s", "higher", 100.0)])]
    hist = make_history(tmp_path, runs=1, cases=odd)
    fams = _families(openmetrics(Store(hist.site.history_db)))
    assert fams["hpcval_figure_value"][0].labels["parameters"] == 'note=a"quoted"\\value'


def test_cli_writes_a_readable_file_atomically(history, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HPCVAL_ROOT", str(history.site.root))
    out = tmp_path / "textfile" / "hpcval.prom"
    assert main(["export", "--site", "demo", "-o", str(out)]) == 0
    assert _families(out.read_text())["hpcval_run_info"]
    assert stat.S_IMODE(out.stat().st_mode) & 0o044 == 0o044  # node_exporter's user reads it
    assert [p.name for p in out.parent.iterdir()] == ["hpcval.prom"]
    assert main(["export", "--site", "demo", "--run", history.run_ids[1]]) == 0
    assert history.run_ids[1] in capsys.readouterr().out


def test_cli_unknown_run_is_one_line_and_exit_2(history, capsys, monkeypatch):
    monkeypatch.setenv("HPCVAL_ROOT", str(history.site.root))
    assert main(["export", "--site", "demo", "--run", "19990101T000000Z-000000"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no run '19990101T000000Z-000000'" in err and "hpcval history" in err
    assert len(err.splitlines()) == 1



def _documented_queries() -> list[str]:
    text = (Path(__file__).resolve().parents[2] / "docs" / "scheduling.md").read_text()
    return re.findall(r"```sql\n(.*?)```", text, re.S)


def test_documented_grafana_queries_run_on_a_store(history):
    import sqlite3

    queries = _documented_queries()
    assert len(queries) == 5
    conn = sqlite3.connect(history.site.history_db)
    try:
        answers = [conn.execute(q).fetchall() for q in queries]
    finally:
        conn.close()
    series, runs, moved, outcomes, failed = answers
    assert len(series) == len(history.run_ids)
    assert all(isinstance(t, float) and v > 1000 for t, v, _ in series)
    assert [r[1] for r in runs] == history.run_ids and runs[-1][2] == "regressed"
    assert ("stream_check@demo:default+impi", "triad", "regressed") in [m[:3] for m in moved]
    assert any(m[1] == "triad" and m[3] < -20 for m in moved)
    first = runs[0][0]
    assert [(o, n) for t, o, n in outcomes if t == first] == [("no-baseline", 9)]
    assert [(f[1], f[4]) for f in failed][:2] in ([("stream_check", "performance"),
                                                   ("ior_check", "sanity")],
                                                  [("ior_check", "sanity"),
                                                   ("stream_check", "performance")])
