"""The shipped alerting rules (monitoring/hpcval-rules.yml) and their unit tests
(monitoring/tests/*.yml), checked by Prometheus' own ``promtool``
(Debian's ``prometheus``: `make system-deps`; skipped with the reason where
it is absent).

Besides ``promtool check rules`` and ``promtool test rules``: every alert has
at least one case in which it fires and one in which it stays silent, and each
firing case is real: with the alert's expression replaced by one that never
fires, ``promtool test rules`` fails."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "monitoring"
RULES = MONITORING / "hpcval-rules.yml"
TESTS = sorted((MONITORING / "tests").glob("*.yml"))
PROMTOOL = shutil.which("promtool")

needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian's `prometheus` package: "
    "`make system-deps` as root)")

#: what the rules must cover (docs/scheduling.md)
ALERTS = {"HpcvalFigureRegressed", "HpcvalCaseFailed", "HpcvalRunInterrupted",
          "HpcvalRunStale", "HpcvalExportMissing", "HpcvalVetNamed", "HpcvalVetIncomplete",
          "HpcvalNodeDrained"}


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def _promtool(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_every_alert_has_labels_and_says_what_to_run_next():
    rules = _rules()
    assert {r["alert"] for r in rules} == ALERTS
    for rule in rules:
        assert rule["labels"]["component"] == "hpcval", rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        assert "hpcval " in rule["annotations"]["next"] or \
            "hpcval vet" in rule["annotations"]["next"], rule["alert"]
    # the run's alerts say which report to read
    for rule in rules:
        if rule["alert"] in ("HpcvalFigureRegressed", "HpcvalCaseFailed",
                             "HpcvalRunInterrupted", "HpcvalRunStale"):
            assert "hpcval report --site {{ $labels.site }}" in rule["annotations"]["next"]


def test_every_alert_has_a_firing_and_a_silent_case():
    firing: dict[str, int] = {}
    silent: dict[str, int] = {}
    assert TESTS
    for path in TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for t in case.get("alert_rule_test", []):
                into = firing if t.get("exp_alerts") else silent
                into[t["alertname"]] = into.get(t["alertname"], 0) + 1
    assert set(firing) == ALERTS, ALERTS - set(firing)
    assert set(silent) == ALERTS, ALERTS - set(silent)


@needs_promtool
def test_promtool_checks_the_rules():
    proc = _promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in proc.stdout


@needs_promtool
def test_promtool_unit_tests_pass():
    proc = _promtool("test", "rules", *map(str, TESTS))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_promtool
@pytest.mark.parametrize("alert", sorted(ALERTS))
def test_a_rule_that_never_fires_fails_its_unit_test(alert: str, tmp_path: Path):
    """The firing cases test the rule: with its expression made one that never
    fires (an empty vector), ``promtool test rules`` fails on that alert."""
    data = yaml.safe_load(RULES.read_text())
    for group in data["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == alert:
                rule["expr"] = "vector(1) == 0"
    (tmp_path / "hpcval-rules.yml").write_text(yaml.safe_dump(data))
    tests = tmp_path / "tests"
    tests.mkdir()
    for path in TESTS:
        shutil.copy(path, tests / path.name)
    proc = _promtool("test", "rules", *(str(tests / p.name) for p in TESTS), cwd=tmp_path)
    assert proc.returncode != 0, proc.stdout
    assert f"alertname: {alert}," in proc.stdout + proc.stderr
