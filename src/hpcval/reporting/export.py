"""A stored run's figures, verdicts and provenance for monitoring systems.

:func:`openmetrics` renders one run of the results store in the OpenMetrics
text format (https://openmetrics.io): what Prometheus scrapes, what a
Pushgateway takes, and what node_exporter's textfile collector reads from a
``*.prom`` file. Every family is a ``gauge`` without timestamps, the one
subset that the OpenMetrics parsers and the older Prometheus text parser
(node_exporter's textfile collector) both accept as is.

Figures carry the labels ``site, system, partition, environ, check,
parameters, figure, unit``; the run id is kept out of them (a new label value
every night would make a new series every night) and goes into
``hpcval_run_info``. An outcome is written as one gauge per possible state,
1 for the figure's outcome and 0 for the others (OpenMetrics' StateSet
pattern), so that ``hpcval_figure_outcome{outcome="regressed"} == 1`` is an
alert rule and a series never disappears when the outcome changes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from hpcval.core.errors import InputError
from hpcval.history.judging.change import Change
from hpcval.history.store import Store
from hpcval.reporting.report import PerfValue

#: Outcomes of a figure's history verdict (docs/judging.md), in this order.
OUTCOMES = ("regressed", "unstable", "improved", "warn", "inconclusive", "pass",
            "no-baseline")
#: A run's results: the cases' pass/fail, a regression (or an unstable figure that
#: failed the run), an interrupted or orphaned run, a run whose every case skipped.
RUN_RESULTS = ("pass", "fail", "regressed", "unstable", "interrupted", "orphaned", "skipped")

FIGURE_LABELS = ("site", "system", "partition", "environ", "check", "parameters", "figure",
                 "unit")

_FAMILIES: dict[str, str] = {
    "hpcval_run_info": "The exported run: its id, host, ReFrame version and result (value 1)",
    "hpcval_run_start_time_seconds": "When the exported run started (Unix time)",
    "hpcval_run_result": "1 for the run's result, 0 for the other results",
    "hpcval_run_figures": "Figures of the run by history outcome",
    "hpcval_case_passed": "1 when the test case passed, 0 when it failed or was skipped",
    "hpcval_case_info": "The MPI stack a test case ran with (value 1)",
    "hpcval_figure_value": "The figure's value in this run (median of its samples)",
    "hpcval_figure_samples": "How many samples the figure's value is the median of",
    "hpcval_figure_reference": "The figure's reference value from the site's references",
    "hpcval_figure_lower_bound": "Lower bound of the figure's contract band",
    "hpcval_figure_upper_bound": "Upper bound of the figure's contract band",
    "hpcval_figure_band_passed": "1 when the value is inside its contract band, 0 outside",
    "hpcval_figure_baseline": "Median of the figure's baseline runs in the site's history",
    "hpcval_figure_change_ratio": "Relative change against the baseline (-0.1 = 10 % lower)",
    "hpcval_figure_change_low": "Lower bound of the change's interval (at the verdict's level)",
    "hpcval_figure_change_high": "Upper bound of the change's interval (at the verdict's level)",
    "hpcval_figure_change_level": "Confidence level of the change's interval (0.95 = 95 %)",
    "hpcval_figure_outcome": "1 for the figure's history outcome, 0 for the other outcomes",
}

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def parameters(params: dict[str, Any]) -> str:
    """A case's parameters as one label value: ``cache=warm,size=1024``."""
    return ",".join(f"{k}={params[k]}" for k in sorted(params))


class _Families:
    def __init__(self) -> None:
        self.samples: dict[str, list[str]] = {name: [] for name in _FAMILIES}

    def add(self, name: str, labels: dict[str, str], value: float | None) -> None:
        if value is None or not isinstance(value, int | float):
            return
        assert _NAME.match(name) and name in self.samples, name
        text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
        self.samples[name].append(f"{name}{{{text}}} {_number(float(value))}")

    def text(self) -> str:
        out = []
        for name, help_text in _FAMILIES.items():
            if not self.samples[name]:
                continue
            out += [f"# TYPE {name} gauge", f"# HELP {name} {_escape(help_text)}"]
            out += self.samples[name]
        return "\n".join(out + ["# EOF"]) + "\n"


def _run(store: Store, run_id: str | None) -> dict[str, Any]:
    runs = store.runs()
    if not runs:
        raise InputError(f"{store.path}: no run stored yet; run `hpcval validate` first")
    if run_id is None:
        return runs[-1]
    for run in runs:
        if run["run_id"] == run_id:
            return run
    raise InputError(f"{store.path}: no run {run_id!r}; `hpcval history --site "
                     f"{store.path.parent.name}` lists the stored runs")


def openmetrics(store: Store, run_id: str | None = None) -> str:
    """The run ``run_id`` of the store (default: the latest) as OpenMetrics text."""
    run = _run(store, run_id)
    run_id = str(run["run_id"])
    site = str(run["site"])
    prov = json.loads(run.get("provenance") or "{}")
    prov = prov if isinstance(prov, dict) else {}
    fam = _Families()
    fam.add("hpcval_run_info", {
        "site": site, "run": run_id, "result": str(run["result"]),
        "accepted": "1" if run["accepted"] else "0",
        **{k: str(prov.get(k) or "") for k in ("hostname", "reframe", "kernel", "machine",
                                                "fabric", "fabric_delay")},
    }, 1)
    fam.add("hpcval_run_start_time_seconds", {"site": site}, run.get("started"))
    for result in RUN_RESULTS:
        fam.add("hpcval_run_result", {"site": site, "result": result},
                1 if run["result"] == result else 0)
    verdicts = store.verdicts(run_id)
    counts = dict.fromkeys(OUTCOMES, 0)
    seen_cases: set[str] = set()
    for row in store.run_figures(run_id):
        case = {"site": site, "system": row["system"] or "", "partition": row["partition"] or "",
                "environ": row["environ"] or "", "check": row["check_name"],
                "parameters": parameters(row["params"])}
        if row["case_key"] not in seen_cases:
            seen_cases.add(row["case_key"])
            fam.add("hpcval_case_passed", case, 1 if row["case_result"] == "pass" else 0)
            fam.add("hpcval_case_info", {**case, "mpi_stack": row["mpi_stack"] or ""}, 1)
        if row["variable"] is None:
            continue
        labels = {**case, "figure": row["variable"], "unit": row["unit"] or ""}
        fam.add("hpcval_figure_value", labels, row["value"])
        fam.add("hpcval_figure_samples", labels, len(row["samples"]))
        lower, upper = PerfValue(row["variable"], row["value"], row["reference"], row["lower"],
                                 row["upper"], row["unit"] or "", "").bounds()
        fam.add("hpcval_figure_reference", labels, row["reference"])
        fam.add("hpcval_figure_lower_bound", labels, lower)
        fam.add("hpcval_figure_upper_bound", labels, upper)
        if row["band_result"] in ("pass", "fail"):
            fam.add("hpcval_figure_band_passed", labels, 1 if row["band_result"] == "pass" else 0)
        verdict = verdicts.get((row["case_key"], row["variable"]))
        if verdict is None:
            continue
        outcome, detail = verdict
        fam.add("hpcval_figure_baseline", labels, detail.get("baseline_median"))
        change = Change.from_detail(detail)
        if change is not None:  # the one change every surface prints (Change.text)
            fam.add("hpcval_figure_change_ratio", labels, change.change)
            fam.add("hpcval_figure_change_low", labels, change.low)
            fam.add("hpcval_figure_change_high", labels, change.high)
            fam.add("hpcval_figure_change_level", labels, change.level)
        for state in _states(outcome):
            fam.add("hpcval_figure_outcome", {**labels, "outcome": state},
                    1 if state == outcome else 0)
        counts[outcome] = counts.get(outcome, 0) + 1
    for outcome, n in counts.items():
        fam.add("hpcval_run_figures", {"site": site, "outcome": outcome}, n)
    return fam.text()


def _states(outcome: str) -> Iterable[str]:
    return OUTCOMES if outcome in OUTCOMES else (*OUTCOMES, outcome)
