"""What a run report becomes in the results store: a :class:`RunRecord` with
its cases (:class:`CaseRecord`) and their judged figures
(:class:`FigureRecord`, with their samples and the direction the check
declared), read from a loaded run report and the samples files its cases
left (:func:`records_from_report`); a figure as history and judging read it
back (:class:`HistoryPoint`); where a store's reports and verdicts files lie
(:func:`run_reports`, :func:`verdicts_path`). The store itself, its schema,
queries and rebuild: :mod:`hpcval.history.store`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.figures import stored_direction
from hpcval.core.series import load_samples


def case_key(display_name: str, system: str, partition: str, environ: str) -> str:
    """The identity of a test case across runs: check with its parameters,
    where it ran, and with which programming environment."""
    return f"{display_name}@{system}:{partition}+{environ}"


@dataclass
class FigureRecord:
    variable: str
    unit: str
    better: str
    value: float | None
    samples: list[float]
    reference: float | None = None
    lower: float | None = None
    upper: float | None = None
    band_result: str | None = None


@dataclass
class CaseRecord:
    key: str
    check: str
    params: dict[str, str]
    system: str
    partition: str
    environ: str
    mpi_stack: str
    software_spec: str
    nodes: str
    result: str
    fail_phase: str | None
    fail_reason: str | None
    figures: list[FigureRecord] = field(default_factory=list)


@dataclass
class RunRecord:
    run_id: str
    site: str
    started: float | None
    finished: float | None
    result: str
    accepted: bool
    report: str
    provenance: dict[str, Any]
    cases: list[CaseRecord] = field(default_factory=list)


@dataclass(frozen=True)
class HistoryPoint:
    """One run's figure, for history, trend and judging."""

    run_id: str
    started: float | None
    accepted: bool
    case_key: str
    variable: str
    unit: str
    better: str
    value: float | None
    samples: list[float]
    band_result: str | None
    case_result: str = "pass"
    case_fail_phase: str | None = None
    #: the run's overall result (``regressed`` for a run judged worse; one a
    #: person then accepted marks the start of a new level)
    run_result: str = ""

    @property
    def measured(self) -> bool:
        """The figure is a measurement: its case passed, or failed only its
        reference band (the performance stage), not before."""
        return self.case_result == "pass" or self.case_fail_phase == "performance"


def _finite(values: Any) -> list[float]:
    out = []
    for v in values if isinstance(values, list) else []:
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
    return out


def _nonfinite(values: Any) -> int:
    """How many of *values* are NaN or inf."""
    return sum(1 for v in values if isinstance(v, float) and not math.isfinite(v)) \
        if isinstance(values, list) else 0


def records_from_report(report: Any, run_id: str, site: str,
                        provenance: dict[str, Any] | None = None,
                        nonfinite: list[tuple[str, int]] | None = None) -> RunRecord:
    """A :class:`RunRecord` from a loaded run report (:mod:`hpcval.history.runreport`)
    and the samples files its cases left in their output directories. NaN and
    inf samples are not measurements: left out, and counted in *nonfinite*
    (``(case key/figure, how many)``) where given."""
    s = report.session
    failed = bool(report.failures)
    prov = {"hostname": s.get("hostname"), "reframe": s.get("version"),
            "cmdline": s.get("cmdline"), "user": s.get("user"), **(provenance or {})}
    # a failed case keeps the run's other figures in baselines (each figure's own
    # case must have passed); only a regression, or a person, leaves a run out
    # a run whose every case was skipped measured nothing: "skipped", never "pass"
    result = "fail" if failed else "skipped" if report.all_skipped else "pass"
    run = RunRecord(run_id, site, s.get("time_start_unix"), s.get("time_end_unix"),
                    result, True, str(report.path), prov)
    for c in report.cases:
        params = {p.split("=", 1)[0].lstrip("%"): p.split("=", 1)[1]
                  for p in c.display_name.split()[1:] if p.startswith("%") and "=" in p}
        raw = c.raw
        nodes = raw.get("job_nodelist") or []
        rec = CaseRecord(
            case_key(c.display_name, c.system, c.partition, c.environ), c.check, params,
            c.system, c.partition, c.environ, c.mpi_stack, str(raw.get("software_spec", "")),
            ",".join(nodes) if isinstance(nodes, list) else str(nodes), c.result,
            c.fail_phase, c.fail_reason)
        samples = load_samples(c.outputdir, c.stagedir) if c.perf else {}
        for p in c.perf:
            value = p.value if isinstance(p.value, int | float) and p.value is not None \
                and math.isfinite(p.value) else None
            sdata = samples.get(p.variable) if isinstance(samples.get(p.variable), dict) else {}
            raw_samples = sdata.get("samples")
            vals = _finite(raw_samples)
            bad = _nonfinite(raw_samples) + int(isinstance(p.value, float) and value is None)
            if bad and nonfinite is not None:
                nonfinite.append((f"{rec.key}/{p.variable}", bad))
            if not vals and value is not None:
                vals = [value]
            direction = stored_direction(sdata.get("better"), p.unit)
            if direction is None:
                # stored before directions were: without its declared direction a
                # figure cannot be judged, and its name is not read to guess one
                continue
            rec.figures.append(FigureRecord(p.variable, p.unit, direction, value, vals,
                                            p.reference, p.lower, p.upper, p.result))
        run.cases.append(rec)
    return run


def verdicts_path(report: Path) -> Path:
    """Where the verdicts and acceptance of a run are kept:
    ``var/<site>/verdicts/<run id>.json`` beside ``reports/``."""
    return report.parent.parent / "verdicts" / (report.stem.removeprefix("run-report-") + ".json")


def run_reports(reports_dir: Path) -> list[Path]:
    """The run reports in a results store, oldest first."""
    return sorted(reports_dir.glob("run-report-*.json"))
