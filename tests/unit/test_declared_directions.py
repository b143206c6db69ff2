"""Every figure of every check is read the way its check declares it.

The base test stores each figure's samples with its declared direction
(``hpcval-samples.json``); the results store, ``hpcval compare`` and
``hpcval references capture`` and the report must take that direction, never one guessed
from the figure's name (``tuned_vs_default`` is a percentage where lower is
better, which no name rule can know)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from hpcval.core.figures import Figure
from hpcval.core.series import write_samples
from hpcval.history.compare import _compare_case
from hpcval.history.store import records_from_report
from hpcval.reporting.report import CaseResult, PerfValue, Row, RunReport
from hpcval.site import checks, refresolve

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> list[tuple[str, Figure]]:
    from hpcval.rfm.base import HpcvalTest

    found = []
    for name, cls in sorted(checks.import_classes(ROOT / "reframe-checks").items()):
        if not issubclass(cls, HpcvalTest):
            continue
        figures = inspect.getattr_static(cls, "figures")
        if isinstance(figures, tuple):  # a property depends on the test case
            found += [(name, fig) for fig in figures]
    return found


DECLARED = _declared()


def test_every_check_is_walked() -> None:
    names = {name for name, _ in DECLARED}
    assert {"imb_tuned_collectives_check", "imb_pingpong_check", "cfdio_read_check",
            "imb_cpu_cost_check"} <= names
    assert ("imb_tuned_collectives_check", Figure("tuned_vs_default", "%", better="lower")) \
        in DECLARED


def _case(tmp_path: Path, check: str, fig: Figure) -> CaseResult:
    out = tmp_path / check
    out.mkdir()
    write_samples(out, fig.name, [4.0, 5.0, 6.0, 5.0, 5.0], fig.unit, fig.direction)
    perf = [PerfValue(fig.name, 5.0, None, None, None, fig.unit, "pass")]
    return CaseResult(check, check, "lab", "compute", "impi", "pass", None, None, "intel-mpi",
                      perf, str(out), None, {})


@pytest.mark.parametrize(("check", "fig"), DECLARED,
                         ids=[f"{c}.{f.name}" for c, f in DECLARED])
def test_store_compare_capture_and_report_use_the_declared_direction(
        tmp_path: Path, check: str, fig: Figure) -> None:
    case = _case(tmp_path, check, fig)
    report = RunReport(tmp_path / "run-report.json", {}, [case])
    (stored,) = records_from_report(report, "r1", "lab").cases[0].figures
    assert stored.better == fig.direction
    (compared,) = _compare_case(case, case)
    assert compared.lower_is_better == (fig.direction == "lower")
    captured = refresolve.capture(report, 0.2, None)[check]["impi"][fig.name]
    worse_side = (None, 0.2) if fig.direction == "lower" else (-0.2, None)
    assert tuple(captured[1:3]) == worse_side
    # the report of a run with no history yet: the direction stored with the samples
    assert Row(case, check, "mpi", case.perf[0], "pass", {}).direction() == fig.direction


def test_old_data_without_a_stored_direction(tmp_path: Path) -> None:
    """A run stored before directions were (no samples file): the unit's kind
    decides where it can; a percentage has no direction of its own, so the
    store leaves it out, capture bounds both sides and compare does not say
    better or worse. No name is read to guess."""
    perf = [PerfValue("lat_8B", 2.0, None, None, None, "us", "pass"),
            PerfValue("tuned_vs_default", 97.0, None, None, None, "%", "pass")]
    case = CaseResult("old_check", "old_check", "lab", "compute", "impi", "pass", None, None,
                      "intel-mpi", perf, str(tmp_path), None, {})
    report = RunReport(tmp_path / "run-report.json", {}, [case])
    stored = records_from_report(report, "r0", "lab").cases[0].figures
    assert [(f.variable, f.better) for f in stored] == [("lat_8B", "lower")]
    captured = refresolve.capture(report, 0.2, None)["old_check"]["impi"]
    assert captured == {"lat_8B": [2.0, None, 0.2, "us"],
                        "tuned_vs_default": [97.0, -0.2, 0.2, "%"]}
    compared = {c.column: c for c in _compare_case(case, case)}
    assert compared["lat_8B"].better == "lower"
    assert compared["tuned_vs_default"].better is None
