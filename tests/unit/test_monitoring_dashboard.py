"""The Grafana dashboard (monitoring/grafana/hpcval-dashboard.json): every
panel's PromQL, and every template variable's selector, parsed by Prometheus'
own parser (the expressions, Grafana's variables filled in as Grafana fills
them, written as recording rules and checked with ``promtool check rules``;
skipped with the reason where promtool is absent). Grafana itself is not
installable here (not in Debian 12): the JSON is checked for what Grafana's
provisioning reads, not rendered. The metric names the dashboard and the
alerting rules use must be families ``hpcval export`` writes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_stack import dashboard_queries

from hpcval.reporting import export
from hpcval.vet import metrics

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "monitoring" / "grafana"
DASHBOARD = GRAFANA / "hpcval-dashboard.json"
RULES = ROOT / "monitoring" / "hpcval-rules.yml"
PROMTOOL = shutil.which("promtool")
#: Grafana's variables as it fills them (a single value; "All" is the regex .*)
VARIABLES = {"$site": "local", "$check": ".*", "$partition": ".*"}
#: series Prometheus makes itself
BUILTIN = {"ALERTS", "ALERTS_FOR_STATE"}

needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian's `prometheus` package: "
    "`make system-deps` as root)")


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def _panels(dash: dict) -> list[dict]:
    """Every panel, those inside rows too."""
    out = []
    for p in dash["panels"]:
        out.append(p)
        out += p.get("panels", [])
    return out


def _metric_names(expr: str) -> set[str]:
    no_strings = re.sub(r'"[^"]*"', '""', expr)
    names = set(re.findall(r"\b(hpcval_[a-z0-9_]+|ALERTS)\b", no_strings))
    return names


def test_the_dashboard_is_ready_for_provisioning():
    dash = _dashboard()
    assert dash["uid"] == "hpcval" and dash["title"] and dash["schemaVersion"] >= 30
    assert "id" not in dash  # provisioning assigns it
    panels = [p for p in _panels(dash) if p["type"] != "row"]
    assert len(panels) >= 10
    ids = [p["id"] for p in _panels(dash)]
    assert len(ids) == len(set(ids))
    for p in panels:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"] and all(t["expr"] for t in p["targets"]), p["title"]
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
    names = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "site", "check", "partition"} <= names
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "hpcval.yml")
                              .read_text())
    assert provider["providers"][0]["type"] == "file"
    source = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml")
                            .read_text())
    assert source["datasources"][0]["type"] == "prometheus"


def test_every_metric_named_is_one_the_export_writes():
    written = set(export._FAMILIES) | set(metrics.HELP) | BUILTIN
    used = {n for _, expr in dashboard_queries(VARIABLES) for n in _metric_names(expr)}
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    used_by_rules = {n for r in rules for n in _metric_names(r["expr"])}
    assert used - written == set()
    assert used_by_rules - written == set()
    # the dashboard covers runs, vettings and gates
    assert {"hpcval_figure_value", "hpcval_figure_change_ratio", "hpcval_vet_finding",
            "hpcval_gate_passed", "hpcval_health_passed"} <= used


def _check(queries: list[tuple[str, str]], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    rules = {"groups": [{"name": "hpcval-dashboard", "rules": [
        {"record": f"hpcval_dashboard_query_{i}", "expr": expr}
        for i, (_, expr) in enumerate(queries)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules))
    return subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=60, check=False)


@needs_promtool
def test_every_query_parses_with_prometheus_own_parser(tmp_path: Path):
    queries = dashboard_queries(VARIABLES)
    proc = _check(queries, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(queries)} rules found" in proc.stdout


@needs_promtool
def test_a_broken_query_is_refused(tmp_path: Path):
    proc = _check([("broken", 'sum by (site (hpcval_figure_value{site="local"})')], tmp_path)
    assert proc.returncode != 0
    assert "parse error" in proc.stdout + proc.stderr
